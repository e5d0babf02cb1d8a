//! The database schema, its version, and the checks that tell an smtlab database from
//! any other file. `SCHEMA.md` beside `Cargo.toml` explains every column.

/// `PRAGMA application_id` of every smtlab results database: `SMTL` in ASCII. SQLite
/// keeps it in the file header, so `file(1)` and smtlab tell our files from other
/// SQLite files without reading a table.
pub const APPLICATION_ID: u32 = 0x534d_544c;

/// `PRAGMA user_version`: the schema version this build writes and the newest it reads.
/// Bump it with every incompatible change and add a migration from the previous one to
/// [`MIGRATIONS`].
///
/// * 1: the first schema.
/// * 2: `cells.counters` (performance counters, `/proc/stat` and syscall time of a cell
///   measured with `--counters`).
/// * 3: `rounds` (each round of a cell measured with `--repeat`).
/// * 4: `leases` (which process is measuring a run).
/// * 5: `runs.label` (a name the user gives a run: `smtlab run --label`).
/// * 6: `runs.uid` (a key that names the run in every database it is pushed to:
///   `smtlab push` stores a run once however often it is pushed). Runs of older files
///   get one derived from what they hold when the file is upgraded.
/// * 7: `runs.host_id` (the machine's stable id, `Environment::host_id`), NULL in runs
///   made before it was recorded, and the index `runs_by_host` on `(hostname, host_id)`
///   (`smtlab fleet` finds the one id a hostname's runs carry with it).
pub const SCHEMA_VERSION: i64 = 7;

/// `(version, SQL)`: the SQL that turns a file of `version - 1` into `version`. A file
/// of version v gets every migration above v, in order, in one transaction with the
/// new `user_version`, so a failure leaves the file as it was. Each step only adds:
/// older smtlab builds refuse the upgraded file (its version is newer than they know)
/// rather than misread it.
pub const MIGRATIONS: &[(i64, &str)] = &[
    (
        2,
        "ALTER TABLE cells ADD COLUMN counters TEXT;  -- JSON CellCounters, NULL when not counted",
    ),
    (3, rounds_sql!()),
    (4, leases_sql!()),
    (
        5,
        "ALTER TABLE runs ADD COLUMN label TEXT;  -- the user's name for the run, NULL when none",
    ),
    (
        6,
        concat!(
            "ALTER TABLE runs ADD COLUMN uid TEXT;  -- the run's key in every database (smtlab push)\n",
            uid_index_sql!()
        ),
    ),
    (
        7,
        concat!(
            "ALTER TABLE runs ADD COLUMN host_id TEXT;  -- the machine's stable id, NULL when unknown\n",
            host_index_sql!()
        ),
    ),
];

/// The index that finds the host id the runs of a hostname carry, new in version 7.
macro_rules! host_index_sql {
    () => {
        "CREATE INDEX IF NOT EXISTS runs_by_host ON runs (hostname, host_id);\n"
    };
}
use host_index_sql;

/// The index that makes a run key unique, new in version 6. The upgrade gives the runs
/// already in the file their keys in the same transaction (`codec::derived_uid`).
macro_rules! uid_index_sql {
    () => {
        "CREATE UNIQUE INDEX IF NOT EXISTS runs_by_uid ON runs (uid);\n"
    };
}
use uid_index_sql;

/// The `leases` table, new in version 4 (see `rounds_sql`).
macro_rules! leases_sql {
    () => {
        r#"
-- The process measuring a run, while it does (Store::lease_run); the row goes when it stops.
CREATE TABLE IF NOT EXISTS leases (
    run_id             INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    pid                INTEGER NOT NULL,
    host               TEXT    NOT NULL,
    token              TEXT    NOT NULL,  -- tells this holder from a later one with the same pid
    acquired_unix_ms   INTEGER NOT NULL,
    heartbeat_unix_ms  INTEGER NOT NULL   -- renewed every few seconds while measuring
);
"#
    };
}
use leases_sql;

/// The `rounds` table, new in version 3: part of [`SCHEMA_SQL`] and the whole of the
/// migration to 3 (a macro, so both are one literal).
macro_rules! rounds_sql {
    () => {
        concat!(
            r#"
-- Each round of a cell measured in several rounds (--repeat), in order; none for one round.
CREATE TABLE IF NOT EXISTS rounds (
    cell_id          INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    idx              INTEGER NOT NULL,        -- 0-based round number
    iterations       INTEGER NOT NULL,        -- inner iterations of this round's samples
    converged        INTEGER NOT NULL CHECK (converged IN (0, 1)),
    wall_ns          INTEGER NOT NULL,
    -- Statistics of this round's samples alone (columns as in summaries).
"#,
            stats_sql!(),
            r#"    PRIMARY KEY (cell_id, idx)
) WITHOUT ROWID;
"#
        )
    };
}
use rounds_sql;

/// The columns of a sample statistic, the same in `rounds` and `summaries`.
macro_rules! stats_sql {
    () => {
        r#"    n                INTEGER NOT NULL,
    mean             REAL    NOT NULL,
    median           REAL    NOT NULL,
    min              REAL    NOT NULL,
    max              REAL    NOT NULL,
    p25              REAL    NOT NULL,
    p75              REAL    NOT NULL,
    stddev           REAL    NOT NULL,
    ci95_half_width  REAL    NOT NULL,
    ci95_rel         REAL    NOT NULL,
"#
    };
}
use stats_sql;

/// The first 16 bytes of every SQLite 3 database file.
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The current schema (version 2 is this without `rounds`, version 1 also without
/// `cells.counters`). Conventions: times are integer seconds or nanoseconds with the
/// unit in the name; enums are their lowercase serde names; `JSON` columns hold the
/// model type's serde JSON; unsigned model integers are stored as SQLite's signed
/// 64-bit INTEGER (values above 2^63-1 are refused on write). Query-friendly facts get
/// columns; nested data stays JSON so a load rebuilds the exact `RunResults`.
pub const SCHEMA_SQL: &str = concat!(
    r#"
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
    notes            TEXT    NOT NULL,        -- JSON array of strings
    label            TEXT,                    -- the user's name for the run (smtlab run --label)
    uid              TEXT,                    -- the run's key wherever it is pushed (32 hex digits)
    host_id          TEXT                     -- the machine's stable id (Environment.host_id)
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
    facts             TEXT    NOT NULL,       -- JSON: calibration, warmup, clock and loop
                                              -- costs, subtracted_ns_per_sample, config
    counters          TEXT                    -- JSON CellCounters; NULL without --counters
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
"#,
    stats_sql!(),
    r#"    PRIMARY KEY (cell_id, kind)
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
"#,
    uid_index_sql!(),
    host_index_sql!(),
    rounds_sql!(),
    leases_sql!()
);

/// The PostgreSQL schema's version, kept in `smtlab.schema_version`. It has its own
/// history, which starts with everything SQLite's version 6 holds.
///
/// * 1: the first PostgreSQL schema.
/// * 2: `runs.host_id` and the index `runs_by_host` (SQLite's version 7).
pub const PG_SCHEMA_VERSION: i64 = 2;

/// `(version, SQL)` as [`MIGRATIONS`], for PostgreSQL: run in order, in one transaction
/// that holds [`PG_LOCK_KEY`], so that many hosts opening a new database at once
/// create or upgrade it once.
pub const PG_MIGRATIONS: &[(i64, &str)] = &[(2, PG_HOST_ID_SQL)];

/// PostgreSQL's `runs.host_id` and `runs_by_host` (version 2).
const PG_HOST_ID_SQL: &str = "ALTER TABLE smtlab.runs ADD COLUMN host_id TEXT;
CREATE INDEX IF NOT EXISTS runs_by_host ON smtlab.runs (hostname, host_id);";

/// SQLite's schema version whose columns and tables a PostgreSQL schema of `pg_version`
/// holds: the first PostgreSQL schema held everything of SQLite's 6, and each version
/// since adds what one SQLite version added.
pub const fn sqlite_equivalent(pg_version: i64) -> i64 {
    pg_version + 5
}

/// The transaction-scoped advisory lock (`pg_advisory_xact_lock`) taken while the
/// schema is created or upgraded: `SMTL` in ASCII.
pub const PG_LOCK_KEY: i64 = 0x534d_544c;

/// The columns of a sample statistic in PostgreSQL (`stats_sql` in SQLite's words) and
/// the table's end, its key the cell and `$key`.
macro_rules! pg_stats_sql {
    ($key:literal) => {
        concat!(
            r#"    n                BIGINT NOT NULL,
    mean             DOUBLE PRECISION NOT NULL,
    median           DOUBLE PRECISION NOT NULL,
    min              DOUBLE PRECISION NOT NULL,
    max              DOUBLE PRECISION NOT NULL,
    p25              DOUBLE PRECISION NOT NULL,
    p75              DOUBLE PRECISION NOT NULL,
    stddev           DOUBLE PRECISION NOT NULL,
    ci95_half_width  DOUBLE PRECISION NOT NULL,
    ci95_rel         DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (cell_id, "#,
            $key,
            r#")
);
"#
        )
    };
}

/// The PostgreSQL schema: the tables of [`SCHEMA_SQL`] in their own namespace `smtlab`
/// (so a shared database may hold other things), with PostgreSQL's types: 64-bit
/// integers (`BIGINT`), `DOUBLE PRECISION` for SQLite's `REAL`, `BOOLEAN` for 0/1,
/// `BYTEA` for `BLOB`, and ids from identity sequences, which hand out distinct ids to
/// concurrent writers on any number of hosts. JSON stays `TEXT`, as in SQLite, so that a
/// run loads back bit for bit (`jsonb` would reorder keys and respell numbers); cast it
/// (`environment::jsonb`) to query inside it.
pub const PG_SCHEMA_SQL: &str = concat!(
    r#"
CREATE TABLE smtlab.schema_version (
    version  BIGINT NOT NULL
);

CREATE TABLE smtlab.runs (
    id               BIGINT  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    uid              TEXT    NOT NULL UNIQUE,  -- the run's key wherever it is pushed
    started_unix_s   BIGINT  NOT NULL,
    finished_unix_s  BIGINT,
    status           TEXT    NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    suite            TEXT,
    command_line     TEXT    NOT NULL,
    tool_version     TEXT    NOT NULL,
    git_commit       TEXT,
    hostname         TEXT,
    kernel           TEXT,
    cpu_model        TEXT,
    smt_control      TEXT,
    environment      TEXT    NOT NULL,
    topology         TEXT    NOT NULL,
    config           TEXT    NOT NULL,
    notes            TEXT    NOT NULL,
    label            TEXT,
    host_id          TEXT
);

CREATE TABLE smtlab.plan (
    run_id     BIGINT NOT NULL REFERENCES smtlab.runs(id) ON DELETE CASCADE,
    position   BIGINT NOT NULL,
    benchmark  TEXT   NOT NULL,
    params     TEXT   NOT NULL,
    placement  TEXT   NOT NULL,
    PRIMARY KEY (run_id, position)
);

CREATE TABLE smtlab.cells (
    id              BIGINT  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id          BIGINT  NOT NULL REFERENCES smtlab.runs(id) ON DELETE CASCADE,
    position        BIGINT,
    benchmark       TEXT    NOT NULL,
    group_name      TEXT    NOT NULL,
    unit            TEXT    NOT NULL,
    direction       TEXT    NOT NULL CHECK (direction IN ('higher', 'lower')),
    params          TEXT    NOT NULL,
    placement_spec  TEXT    NOT NULL,
    placement_name  TEXT    NOT NULL,
    cpus            TEXT    NOT NULL,
    placement       TEXT    NOT NULL,
    converged       BOOLEAN NOT NULL,
    stop_reason     TEXT    NOT NULL,
    iterations      BIGINT  NOT NULL,
    wall_ns         BIGINT  NOT NULL,
    facts           TEXT    NOT NULL,
    counters        TEXT
);
CREATE INDEX cells_by_key ON smtlab.cells (run_id, benchmark, placement_spec);

CREATE TABLE smtlab.samples (
    cell_id          BIGINT NOT NULL REFERENCES smtlab.cells(id) ON DELETE CASCADE,
    idx              BIGINT NOT NULL,
    value            DOUBLE PRECISION NOT NULL,
    iterations       BIGINT NOT NULL,
    elapsed_ns       BIGINT NOT NULL,
    work             DOUBLE PRECISION NOT NULL,
    cpu_ns           BIGINT,
    start_spread_ns  BIGINT,
    cpus             TEXT   NOT NULL,
    metrics          TEXT,
    PRIMARY KEY (cell_id, idx)
);

CREATE TABLE smtlab.summaries (
    cell_id          BIGINT NOT NULL REFERENCES smtlab.cells(id) ON DELETE CASCADE,
    kind             TEXT   NOT NULL CHECK (kind IN ('value', 'cpu_rate', 'start_spread_ns')),
"#,
    pg_stats_sql!("kind"),
    r#"
CREATE TABLE smtlab.rounds (
    cell_id          BIGINT  NOT NULL REFERENCES smtlab.cells(id) ON DELETE CASCADE,
    idx              BIGINT  NOT NULL,
    iterations       BIGINT  NOT NULL,
    converged        BOOLEAN NOT NULL,
    wall_ns          BIGINT  NOT NULL,
"#,
    pg_stats_sql!("idx"),
    r#"
CREATE TABLE smtlab.series (
    cell_id  BIGINT NOT NULL REFERENCES smtlab.cells(id) ON DELETE CASCADE,
    name     TEXT   NOT NULL,
    n        BIGINT NOT NULL,
    data     BYTEA  NOT NULL,
    PRIMARY KEY (cell_id, name)
);

CREATE TABLE smtlab.skipped (
    id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id     BIGINT NOT NULL REFERENCES smtlab.runs(id) ON DELETE CASCADE,
    benchmark  TEXT   NOT NULL,
    params     TEXT   NOT NULL,
    placement  TEXT   NOT NULL,
    reason     TEXT   NOT NULL
);
CREATE INDEX skipped_by_run ON smtlab.skipped (run_id);
CREATE INDEX runs_by_host ON smtlab.runs (hostname, host_id);

CREATE TABLE smtlab.leases (
    run_id             BIGINT PRIMARY KEY REFERENCES smtlab.runs(id) ON DELETE CASCADE,
    pid                BIGINT NOT NULL,
    host               TEXT   NOT NULL,
    token              TEXT   NOT NULL,
    acquired_unix_ms   BIGINT NOT NULL,
    heartbeat_unix_ms  BIGINT NOT NULL
);
"#
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_id_spells_smtl() {
        assert_eq!(&APPLICATION_ID.to_be_bytes(), b"SMTL");
        // SQLite stores application_id as a signed 32-bit value; ours must fit.
        assert!(i32::try_from(APPLICATION_ID).is_ok());
    }

    #[test]
    fn migrations_reach_the_current_version_in_steps_of_one() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        let expected: Vec<i64> = (2..=SCHEMA_VERSION).collect();
        assert_eq!(versions, expected);
    }

    #[test]
    fn schema_sql_is_valid_and_idempotent() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            tables,
            [
                "cells",
                "leases",
                "plan",
                "rounds",
                "runs",
                "samples",
                "series",
                "skipped",
                "summaries"
            ]
        );
    }
}
