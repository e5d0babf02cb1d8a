-- Gives every run of a store built by the fleet_store example K earlier copies (K from
-- 1 to :copies - 1), each a day older, with new ids and keys: a host measured :copies
-- times. Plain SQL that SQLite and PostgreSQL both run (ids offset, not drawn).
WITH RECURSIVE k(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM k WHERE k < COPIES - 1)
INSERT INTO runs (id, uid, started_unix_s, finished_unix_s, status, suite, command_line,
                  tool_version, git_commit, hostname, kernel, cpu_model, smt_control,
                  environment, topology, config, notes, label)
SELECT r.id + k * 1000000, r.uid || '-' || k, r.started_unix_s - k * 86400,
       r.finished_unix_s - k * 86400, r.status, r.suite, r.command_line, r.tool_version,
       r.git_commit, r.hostname, r.kernel, r.cpu_model, r.smt_control, r.environment,
       r.topology, r.config, r.notes, r.label
FROM runs r, k WHERE r.id < 1000000;

WITH RECURSIVE k(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM k WHERE k < COPIES - 1)
INSERT INTO plan (run_id, position, benchmark, params, placement)
SELECT p.run_id + k * 1000000, p.position, p.benchmark, p.params, p.placement
FROM plan p, k WHERE p.run_id < 1000000;

WITH RECURSIVE k(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM k WHERE k < COPIES - 1)
INSERT INTO cells (id, run_id, position, benchmark, group_name, unit, direction, params,
                   placement_spec, placement_name, cpus, placement, converged, stop_reason,
                   iterations, wall_ns, facts, counters)
SELECT c.id + k * 100000000, c.run_id + k * 1000000, c.position, c.benchmark, c.group_name,
       c.unit, c.direction, c.params, c.placement_spec, c.placement_name, c.cpus,
       c.placement, c.converged, c.stop_reason, c.iterations, c.wall_ns, c.facts, c.counters
FROM cells c, k WHERE c.id < 100000000;

WITH RECURSIVE k(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM k WHERE k < COPIES - 1)
INSERT INTO samples (cell_id, idx, value, iterations, elapsed_ns, work, cpu_ns,
                     start_spread_ns, cpus, metrics)
SELECT s.cell_id + k * 100000000, s.idx, s.value, s.iterations, s.elapsed_ns, s.work,
       s.cpu_ns, s.start_spread_ns, s.cpus, s.metrics
FROM samples s, k WHERE s.cell_id < 100000000;

WITH RECURSIVE k(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM k WHERE k < COPIES - 1)
INSERT INTO summaries (cell_id, kind, n, mean, median, min, max, p25, p75, stddev,
                       ci95_half_width, ci95_rel)
SELECT s.cell_id + k * 100000000, s.kind, s.n, s.mean, s.median, s.min, s.max, s.p25,
       s.p75, s.stddev, s.ci95_half_width, s.ci95_rel
FROM summaries s, k WHERE s.cell_id < 100000000;
