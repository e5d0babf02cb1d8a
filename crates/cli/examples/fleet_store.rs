//! Writes a made-up fleet into a results file for `scripts/fleet-scale.sh`: HOSTS hosts
//! (`host0001` ...), one run each of 80 cells (`int-ops` with 20 thread counts on
//! `1c1t`, `1c2t`, `cores`, `all`, five samples a cell), spread over four CPU models
//! with yields that vary by host. Further runs per host are copied in SQL by the script.
//!
//! Usage: `fleet_store FILE HOSTS`

use smtlab_fixtures::fleet::{FakeHost, run_of};
use smtlab_store::Store;

const MODELS: [&str; 4] = [
    "Demo Xeon A @ 2.0GHz",
    "Demo Xeon B @ 2.4GHz",
    "Demo EPYC C",
    "Demo EPYC D",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(file), Some(hosts)) = (
        args.get(1),
        args.get(2).and_then(|h| h.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: fleet_store FILE HOSTS (a number)");
        std::process::exit(2);
    };
    let threads: Vec<String> = (1..=20).map(|t| t.to_string()).collect();
    let threads: Vec<&str> = threads.iter().map(String::as_str).collect();
    let mut store = match Store::open(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    for i in 0..hosts {
        // Yields from 1.05 to 1.34, a few hosts far below their model's.
        let y = if i % 97 == 13 {
            0.9
        } else {
            1.05 + (i % 30) as f64 / 100.0
        };
        let mut h = FakeHost::new(&format!("host{:04}", i + 1), MODELS[i % MODELS.len()], y);
        h.started_unix_s = 1_790_000_000 + i as u64;
        if let Err(e) = store.import_run(&run_of(&h, &threads)) {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
