//! Names of the per-sample metrics (`SampleRecord::metrics`) and per-cell series
//! (`CellResult::series`) that a benchmark or experiment writes and the report reads.
//! One home, so a rename on one side is a compile error on the other rather than an
//! empty report section.

/// Written by co-run cells (`smtlab corun`, `smtlab penalty`).
pub mod corun {
    /// Metric: mean value of the partner's samples inside A's sample, in the partner's
    /// unit.
    pub const PARTNER_VALUE: &str = "partner_value";
    /// Metric: mean value of the partner's samples in a window of the same length right
    /// after A's sample, with A idle: the partner alone on its own CPU.
    pub const PARTNER_ALONE_VALUE: &str = "partner_alone_value";
    /// Metric: how many partner samples fell inside A's sample.
    pub const PARTNER_SAMPLES: &str = "partner_samples";
    /// Series: the wall time of each of A's samples.
    pub const RUN_NS: &str = "run_ns";
}

/// Written beside the figures of every cell of a security mode (`advise --security`):
/// what core scheduling cost during the sample.
pub mod coresched {
    /// Metric: forced idle charged to smtlab's tasks and their children's during the
    /// sample (the growth of their `core_forceidle_sum`), in nanoseconds.
    pub const FORCEIDLE_NS: &str = "core_forceidle_ns";
    /// Metric: [`FORCEIDLE_NS`] over the CPU time the placement had around the sample
    /// (the time between the two readings times its CPUs): the share of it a sibling
    /// stood forced idle.
    pub const FORCEIDLE_SHARE: &str = "core_forceidle_share";
}

/// Written by a multiprogrammed mix (`mix`, paper 003 section 2.3): for each program of
/// the mix, in the order given, its throughput in the mix, alone (each in the program's
/// unit), and its progress (the ratio of work per second: 1 is as fast as alone), each
/// under [`mix::key`]. The sample's
/// value is the sum of the progresses: the weighted speedup.
pub mod mix {
    /// Field: the program's mean value in the mix, in its own unit.
    pub const IN_MIX: &str = "mix";
    /// Field: the program's mean value alone on its CPU, in the same window length.
    pub const ALONE: &str = "alone";
    /// Field: in-mix over alone work per second: 1 when the mix does not slow the
    /// program, 0.5 when it runs at half speed.
    pub const PROGRESS: &str = "progress";
    /// Field: the CPU the program ran on.
    pub const CPU: &str = "cpu";

    /// The metric of program `index` (named `name`) and `field`: `mix.0.int-ops.progress`.
    pub fn key(index: usize, name: &str, field: &str) -> String {
        format!("mix.{index}.{name}.{field}")
    }

    /// The program index, name and field of a [`key`], or `None` for another metric.
    pub fn parse(key: &str) -> Option<(usize, &str, &str)> {
        let rest = key.strip_prefix("mix.")?;
        let (index, rest) = rest.split_once('.')?;
        let (name, field) = rest.rsplit_once('.')?;
        Some((index.parse().ok()?, name, field))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn keys_read_back_with_dotted_names() {
            let k = super::key(3, "gz.big", super::PROGRESS);
            assert_eq!(super::parse(&k), Some((3, "gz.big", "progress")));
            assert_eq!(super::parse("partner_value"), None);
        }
    }
}

/// Written by a chat load (paper 001 Table 3: its rooms, connections, threads and
/// messages per round), the shape the report tabulates beside the speed-ups.
pub mod chat {
    pub const ROOMS: &str = "rooms";
    pub const CONNECTIONS: &str = "connections";
    /// Threads of both sides (two per connection each).
    pub const THREADS: &str = "threads";
    pub const MESSAGES_SENT: &str = "messages_sent";
    pub const MESSAGES_RECEIVED: &str = "messages_received";
    pub const MESSAGES_TOTAL: &str = "messages_total";
}

/// Written by the open-loop load of a utilisation curve (`smtlab util`): where the
/// placement CPUs' `/proc/stat` time went during a step, and the rate offered.
pub mod util {
    pub const USER_FRAC: &str = "user_frac";
    pub const SYSTEM_FRAC: &str = "system_frac";
    pub const IOWAIT_FRAC: &str = "iowait_frac";
    /// irq, softirq and steal.
    pub const OTHER_FRAC: &str = "other_frac";
    pub const IDLE_FRAC: &str = "idle_frac";
    /// Jobs per second offered (absent at the maximum).
    pub const OFFERED_PER_S: &str = "offered_per_s";
}

/// Series of the thread benchmarks, per timed event, in nanoseconds.
pub mod threads {
    /// `pthread_create` call to its return.
    pub const CREATE_RETURN_NS: &str = "create_return_ns";
    /// `pthread_create` call to the new thread running.
    pub const THREAD_START_NS: &str = "thread_start_ns";
    /// The unlock call of a contended mutex.
    pub const UNLOCK_NS: &str = "unlock_ns";
    /// The signal or broadcast call of a condition variable.
    pub const CALL_NS: &str = "call_ns";
    /// Start of the unlock/signal call to the waiter running.
    pub const WAKE_NS: &str = "wake_ns";
}

/// The `frontend` benchmark: the code its walk spans and the L1 instruction cache it
/// is held against (when the topology gives its size).
pub mod frontend {
    pub const CODE_BYTES: &str = "code_bytes";
    pub const L1I_BYTES: &str = "l1i_bytes";
}

/// Metrics of the task pool (`task-pool`).
pub mod task_pool {
    /// Milliseconds to run one task tree.
    pub const TREE_MS: &str = "tree_ms";
    pub const TASKS_PER_TREE: &str = "tasks_per_tree";
    /// Worker threads the pool ran.
    pub const WORKERS: &str = "workers";
    pub const CAS_RETRIES_PER_TASK: &str = "cas_retries_per_task";
    pub const LOCK_CONTENDED_PER_TASK: &str = "lock_contended_per_task";
}

/// Metrics and series of the web and network workloads.
pub mod web {
    pub const REQUESTS_PER_S: &str = "requests_per_s";
    pub const BYTES_PER_REQUEST: &str = "bytes_per_request";
    pub const LATENCY_P50_NS: &str = "latency_p50_ns";
    pub const LATENCY_P90_NS: &str = "latency_p90_ns";
    pub const LATENCY_P99_NS: &str = "latency_p99_ns";
    pub const LATENCY_P999_NS: &str = "latency_p999_ns";
    pub const LATENCY_MAX_NS: &str = "latency_max_ns";
    /// Metric: 1 where the capacity search hit its connection cap.
    pub const CAPPED: &str = "capped";
    /// Series: share of requests within the latency bound, by connection count.
    pub const CONFORMING_FRACTION_BY_CONNS: &str = "conforming_fraction_by_conns";
    /// Metric: errors in the sample.
    pub const ERRORS: &str = "errors";
    /// Metric: requests completed in the sample.
    pub const REQUESTS: &str = "requests";
    /// Metric: TCP connections opened in the sample.
    pub const CONNECTS: &str = "connects";
    /// Metric: the load threads' share of their time on a CPU working on the load (their
    /// mean; spinning on empty polls left out); near 1 the load generator, not the
    /// server, set the figure.
    pub const CLIENT_BUSY: &str = "client_busy";
    /// Parameter (not a metric) of an open loop's offered rate, requests per second (0:
    /// closed loop): `web-static rate=R`, the points of `advise`'s latency sweep.
    pub const RATE_PARAM: &str = "rate";
    /// Metric: an open loop's offered rate, requests per second (`web-static rate=R`).
    pub const OFFERED_PER_S: &str = "offered_per_s";
    /// Metric: an open loop's requests that came due but were never sent, their
    /// connection still waiting for an earlier answer (the server fell behind).
    pub const UNSENT: &str = "unsent";
    /// Metric: smtlab agents that sent the load (`--client-hosts`); absent for a local load.
    pub const AGENTS: &str = "agents";
    /// Metric: agents named but lost (unreachable, or gone during a load) before this
    /// sample's load, which the others sent; absent when none was.
    pub const AGENTS_LOST: &str = "agents_lost";
    /// Metric: latest agent start minus earliest, by the measured host's clock.
    pub const AGENTS_START_SPREAD_NS: &str = "agents_start_spread_ns";

    /// Metric: agent `i`'s requests per second (its share of the load).
    pub fn agent_requests_per_s(i: usize) -> String {
        format!("agent{i}_requests_per_s")
    }
    /// Metric: agent `i`'s failed requests.
    pub fn agent_errors(i: usize) -> String {
        format!("agent{i}_errors")
    }
    /// Metric: agent `i`'s wall clock minus the measured host's (accurate to half its rtt).
    pub fn agent_clock_offset_ns(i: usize) -> String {
        format!("agent{i}_clock_offset_ns")
    }
    /// Metric: the shortest round trip to agent `i` when its clock was measured.
    pub fn agent_rtt_ns(i: usize) -> String {
        format!("agent{i}_rtt_ns")
    }
}

/// Metrics of the file-server and netperf-style loads.
pub mod net {
    /// dbench: file operations per second.
    pub const OPS_PER_S: &str = "ops_per_s";
    /// netperf-style: the server thread's CPU time per transaction (request/response).
    pub const SERVER_CPU_US_PER_TX: &str = "server_cpu_us_per_tx";
    /// netperf-style: the server thread's CPU time per KiB (`tcp-stream`).
    pub const SERVER_CPU_US_PER_KIB: &str = "server_cpu_us_per_kib";
    /// netperf-style: the 99th percentile of the round-trip times.
    pub const RTT_P99_NS: &str = "rtt_p99_ns";
}

/// Metrics of the NFS server load (`nfs-sfs`): a paced load's requested rate, and the
/// load points of a peak search (SPEC SFS 3.0's curve: requested and achieved
/// operations per second, and the response times, at each point).
pub mod nfs {
    /// Metric: the requested operations per second of a paced load (`rate=R`, or the
    /// chosen point of a peak search).
    pub const REQUESTED_OPS_PER_S: &str = "requested_ops_per_s";
    /// Metric: 1 where the load achieved at least [`KEPT_UP_SHARE`] of its requested
    /// rate, 0 where the server (or the clients) fell behind.
    pub const KEPT_UP: &str = "kept_up";
    /// A paced load kept up when it achieved at least this share of its requested rate.
    pub const KEPT_UP_SHARE: f64 = 0.95;
    /// Metric: the peak search's closed-loop probe, operations per second (its
    /// capacity C; the points request shares of it).
    pub const PROBE_OPS_PER_S: &str = "probe_ops_per_s";
    /// Metric: load points the peak search measured.
    pub const POINTS: &str = "points";
    /// Metric: the point whose achieved rate is the sample's value (0 first).
    pub const PEAK_POINT: &str = "peak_point";
    /// Metric: the response-time limit, milliseconds.
    pub const LIMIT_MS: &str = "limit_ms";

    named_enum! {
        /// One figure of a load point.
        pub enum PointField {
            RequestedOpsPerS = "requested_ops_per_s",
            AchievedOpsPerS = "achieved_ops_per_s",
            MeanResponseMs = "mean_response_ms",
            P99ResponseMs = "p99_response_ms",
            /// 1 where the point achieved at least [`KEPT_UP_SHARE`] of its requested rate.
            KeptUp = "kept_up",
            /// 1 where the point's mean response time is within the limit.
            WithinLimit = "within_limit",
        }
    }

    /// The metric of load point `index` (0 first) and `field`:
    /// `point2_achieved_ops_per_s`.
    pub fn point_key(index: usize, field: PointField) -> String {
        format!("point{index}_{}", field.name())
    }

    /// The point index and field of a [`point_key`], or `None` for another metric.
    pub fn parse_point_key(key: &str) -> Option<(usize, PointField)> {
        let rest = key.strip_prefix("point")?;
        let (index, field) = rest.split_once('_')?;
        let field = PointField::parse(field)?;
        Some((index.parse().ok()?, field))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn point_keys_read_back() {
            for f in PointField::ALL {
                assert_eq!(parse_point_key(&point_key(7, f)), Some((7, f)));
            }
            assert_eq!(parse_point_key("points"), None);
            assert_eq!(parse_point_key("point1_lookup_ops"), None);
        }
    }
}

/// Written by a sample whose figure reached a limit of the measurement rather than of
/// the system measured: the metric's value is the limit, in the benchmark's unit, and
/// the figure is then only a bound ([`crate::result::AtLimit`]). Every benchmark
/// writes the one of its kind; the runner and the outputs read them here.
pub mod limit {
    /// The end of a search's range (a rate search that met its target at its highest
    /// rate).
    pub const RANGE_END: &str = "at_limit_range_end";
    /// A ceiling the user configured (web-capacity's `max_conns`).
    pub const CEILING: &str = "at_limit_ceiling";
    /// What the load generator itself could offer (its threads saturated, requests it
    /// could not send in time).
    pub const LOAD_GENERATOR: &str = "at_limit_load_generator";
}

/// Written by the fork rows (`fork-exit`, `fork-exec`, `fork-sh`): the size of the
/// process that forks, read from its own `/proc/self/status` and `/proc/self/maps` after
/// each sample. Fork time grows with it, so a fork figure is read beside it.
pub mod fork {
    /// Metric: the forking process's resident set (`VmRSS`), in bytes.
    pub const FORKING_RSS_BYTES: &str = "forking_rss_bytes";
    /// Metric: the anonymous part of that resident set (`RssAnon`), in bytes: the pages
    /// whose page-table entries a fork copies (file pages are mapped again on demand).
    pub const FORKING_ANON_BYTES: &str = "forking_anon_bytes";
    /// Metric: the forking process's memory mappings (lines of its maps).
    pub const FORKING_MAPPINGS: &str = "forking_mappings";
}
