//! Helpers the tests of several workloads share.

/// Whether a descriptor of this process is a socket listening on TCP `port`.
pub(crate) fn this_process_listens_on(port: u16) -> bool {
    let mut inodes: Vec<String> = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is ADDR:PORT in hex, st 0A is LISTEN, inode is field 9.
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) && f.get(3) == Some(&"0A") {
                inodes.extend(f.get(9).map(|i| format!("socket:[{i}]")));
            }
        }
    }
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .any(|l| inodes.iter().any(|i| l.to_string_lossy() == *i))
}
