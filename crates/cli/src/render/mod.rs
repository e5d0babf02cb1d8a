//! Text rendering: pure functions from data to `String`, so output formats are tested
//! with snapshots and the commands stay thin.

pub mod bench;
pub mod placements;
pub mod report;
pub mod run;
pub mod table;
pub mod topo;

/// `32 KiB`, `1.5 MiB`, `24 GiB`: binary units, one decimal only when needed.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || (v - v.round()).abs() < 0.05 {
        format!("{:.0} {}", v, UNITS[u])
    } else {
        format!("{:.1} {}", v, UNITS[u])
    }
}

/// `1 thread`, `2 threads`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn byte_sizes_read_naturally() {
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(32 << 10), "32 KiB");
        assert_eq!(super::bytes(1536 << 10), "1.5 MiB");
        assert_eq!(super::bytes(24 << 30), "24 GiB");
    }
}
