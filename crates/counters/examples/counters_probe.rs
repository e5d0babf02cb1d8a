//! What the counters crate can measure here, then a demo of each part:
//! `cargo run --release -p smtlab-counters --example counters_probe [getppid-calls]`.

use std::time::Duration;

use smtlab_counters::procstat::{ProcStatSampler, SamplerOptions};
use smtlab_counters::{
    CounterError, PerfCounters, PerfOptions, SyscallTracer, TraceOptions, availability, measure,
    missing_lines,
};
use smtlab_model::CpuSet;
use smtlab_model::counters::derived::{Work, derive};
use smtlab_model::counters::os_time::StartupSplit;
use smtlab_model::counters::{CountMode, CounterTarget};

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let a = availability();
    println!("perf_event_paranoid: {:?}", a.perf_event_paranoid);
    for s in &a.events {
        println!(
            "  {:<24} {}",
            s.event.name(),
            s.reason.as_deref().unwrap_or("ok")
        );
    }
    for line in missing_lines(&a) {
        println!("missing: {line}");
    }

    let target = CounterTarget::Thread {
        tid: 0,
        inherit: true,
    };
    let mut counters =
        PerfCounters::open(target.clone(), &PerfOptions::all()).expect("open counters");
    let sampler = ProcStatSampler::start(&CpuSet::from_iter([0, 1]), SamplerOptions::default())
        .expect("start /proc/stat sampler");
    let tracer = SyscallTracer::open(target, TraceOptions::default());
    let running = match tracer {
        Ok(t) => Some(t.start().expect("start tracing")),
        Err(CounterError::Unavailable(reason)) => {
            println!("syscalls skipped: {reason}");
            None
        }
        Err(e) => panic!("{e}"),
    };
    let (_, values) = measure(&mut counters, || {
        for _ in 0..calls {
            // SAFETY: getppid has no preconditions.
            std::hint::black_box(unsafe { libc::getppid() });
        }
        std::thread::sleep(Duration::from_millis(300));
    })
    .expect("count");
    let series = sampler.stop().expect("stop sampler");
    if let Some(r) = running {
        let p = r.stop().expect("stop tracing");
        println!(
            "syscalls: {} kinds, lost {}, unmatched exits {}, unfinished {}",
            p.syscalls.len(),
            p.lost_records,
            p.unmatched_exits,
            p.unfinished
        );
        for s in p.syscalls.iter().take(8) {
            println!(
                "  {:<16} {:<8} calls {:>8} wall {:>10} ns CPU {:>10} ns mean wall {:>8.0} ns",
                s.label(),
                s.group.name(),
                s.calls,
                s.wall_ns,
                s.cpu_ns.map_or("-".to_string(), |c| c.to_string()),
                s.mean_wall_ns().unwrap_or(f64::NAN)
            );
        }
        for g in p.by_group() {
            println!(
                "  group {:<8} calls {:>8} wall {:>10} ns CPU {:>10} ns",
                g.group.name(),
                g.calls,
                g.wall_ns,
                g.cpu_ns.map_or("-".to_string(), |c| c.to_string())
            );
        }
    }
    for e in &values.events {
        println!(
            "counted {:<18} all {:?} user {:?} kernel {:?}",
            e.event.name(),
            e.count(CountMode::All),
            e.count(CountMode::User),
            e.count(CountMode::Kernel)
        );
    }
    let work = Work {
        amount: calls as f64,
        unit: "call".into(),
    };
    let d = derive(&values, CountMode::All, Some(&work));
    println!(
        "cpi {:?}  cpu ns per call {:?}",
        d.cpi,
        d.work.as_ref().and_then(|w| w.cpu_ns_per_unit)
    );
    let p = series.phases(StartupSplit::default());
    println!(
        "/proc/stat: {} intervals; start-up {:?}; steady {:?}",
        series.intervals.len(),
        p.startup.fractions,
        p.steady.fractions
    );
}
