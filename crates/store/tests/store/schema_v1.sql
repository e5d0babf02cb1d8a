-- smtlab results database, schema version 1, exactly as smtlab 0.1.0 created it
-- (SCHEMA_SQL before cells.counters). The migration test builds a version 1 file from it.
-- One row per run (smtlab.results/1 "run").
CREATE TABLE IF NOT EXISTS runs (
    id               INTEGER PRIMARY KEY,
    started_unix_s   INTEGER NOT NULL,
    finished_unix_s  INTEGER,                 -- NULL while running or when cut short
    status           TEXT    NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    suite            TEXT,                    -- quick / default / full, NULL for ad hoc
    command_line     TEXT    NOT NULL,        -- JSON array of strings
    -- Copies of environment fields for queries; `environment` is what loads.
    tool_version     TEXT    NOT NULL,
    git_commit       TEXT,
    hostname         TEXT,
    kernel           TEXT,
    cpu_model        TEXT,
    smt_control      TEXT,
    environment      TEXT    NOT NULL,        -- JSON Environment
    topology         TEXT    NOT NULL,        -- JSON Topology (smtlab.topology/1)
    config           TEXT    NOT NULL,        -- JSON RunConfig
    notes            TEXT    NOT NULL         -- JSON array of strings
);

-- Every planned cell in measuring order; plan minus cells minus skipped = what --resume runs.
CREATE TABLE IF NOT EXISTS plan (
    run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,              -- 0-based index in RunMeta.plan
    benchmark  TEXT    NOT NULL,
    params     TEXT    NOT NULL,              -- JSON object, keys sorted
    placement  TEXT    NOT NULL,              -- as planned: 1c2t, 2c1t/scatter, cpus=0,4
    PRIMARY KEY (run_id, position)
);

-- One row per measured cell, in the order they were saved (id).
CREATE TABLE IF NOT EXISTS cells (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position          INTEGER,                -- plan.position of the same key, NULL if unplanned
    benchmark         TEXT    NOT NULL,
    group_name        TEXT    NOT NULL,       -- compute / memory / threads / os ...
    unit              TEXT    NOT NULL,
    direction         TEXT    NOT NULL CHECK (direction IN ('higher', 'lower')),
    params            TEXT    NOT NULL,       -- JSON object, keys sorted
    placement_spec    TEXT    NOT NULL,       -- as planned (the cell key)
    placement_name    TEXT    NOT NULL,       -- canonical resolved name
    cpus              TEXT    NOT NULL,       -- resolved CPUs as a Linux list (0-3,8), '' for os
    placement         TEXT    NOT NULL,       -- JSON ResolvedPlacement (cpus in thread order)
    converged         INTEGER NOT NULL CHECK (converged IN (0, 1)),
    stop_reason       TEXT    NOT NULL,       -- converged / max_samples / time_budget
    iterations        INTEGER NOT NULL,       -- inner iterations of every measured sample
    wall_ns           INTEGER NOT NULL,       -- wall time of the whole cell
    facts             TEXT    NOT NULL        -- JSON: calibration, warmup, clock and loop
                                              -- costs, subtracted_ns_per_sample, config
);
CREATE INDEX IF NOT EXISTS cells_by_key ON cells (run_id, benchmark, placement_spec);

-- Every measured sample of a cell (calibration and warm-up excluded).
CREATE TABLE IF NOT EXISTS samples (
    cell_id          INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    idx              INTEGER NOT NULL,        -- 0-based order within the cell
    value            REAL    NOT NULL,        -- in the cell's unit
    iterations       INTEGER NOT NULL,
    elapsed_ns       INTEGER NOT NULL,        -- first start to last finish, uncorrected
    work             REAL    NOT NULL,
    cpu_ns           INTEGER,
    start_spread_ns  INTEGER,
    cpus             TEXT    NOT NULL,        -- JSON array: the CPU each worker ran on
    metrics          TEXT,                    -- JSON object of secondary figures, NULL if none
    PRIMARY KEY (cell_id, idx)
) WITHOUT ROWID;

-- Summary statistics of a cell: 'value' always; 'cpu_rate' and 'start_spread_ns' when measured.
CREATE TABLE IF NOT EXISTS summaries (
    cell_id          INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    kind             TEXT    NOT NULL CHECK (kind IN ('value', 'cpu_rate', 'start_spread_ns')),
    n                INTEGER NOT NULL,
    mean             REAL    NOT NULL,
    median           REAL    NOT NULL,
    min              REAL    NOT NULL,
    max              REAL    NOT NULL,
    p25              REAL    NOT NULL,
    p75              REAL    NOT NULL,
    stddev           REAL    NOT NULL,
    ci95_half_width  REAL    NOT NULL,
    ci95_rel         REAL    NOT NULL,
    PRIMARY KEY (cell_id, kind)
) WITHOUT ROWID;

-- Per-sample series of a cell (CellResult.series), e.g. pthread_create call and start times.
CREATE TABLE IF NOT EXISTS series (
    cell_id  INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    name     TEXT    NOT NULL,
    n        INTEGER NOT NULL,                -- number of values
    data     BLOB    NOT NULL,                -- n little-endian IEEE-754 binary64, 8 bytes each
    PRIMARY KEY (cell_id, name)
) WITHOUT ROWID;

-- Cells that could not be measured, and why.
CREATE TABLE IF NOT EXISTS skipped (
    id         INTEGER PRIMARY KEY,
    run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    benchmark  TEXT    NOT NULL,
    params     TEXT    NOT NULL,              -- JSON object, keys sorted
    placement  TEXT    NOT NULL,              -- as planned
    reason     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS skipped_by_run ON skipped (run_id);
