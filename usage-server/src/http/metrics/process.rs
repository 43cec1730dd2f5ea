//! The server process's figures for `GET /metrics`, under the names every Prometheus
//! client library gives them (`process_resident_memory_bytes`, ...), read from
//! `/proc/self` at each scrape. Elsewhere than on Linux, and for a file that cannot be
//! read, the figures are absent, never 0.

use super::text::{Family, Series, Type, Value};

/// Clock ticks per second of `/proc/<pid>/stat`'s times: the kernel's `USER_HZ`, 100 on
/// every Linux architecture Rust targets (the Go client's `procfs` takes the same
/// constant).
const USER_HZ: f64 = 100.0;

/// The figures read; `None` for one that could not be.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Process {
    /// Resident memory (`VmRSS`), bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory (`VmSize`), bytes.
    pub virtual_bytes: Option<u64>,
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit of open file descriptors (`None` when unlimited).
    pub max_fds: Option<u64>,
    /// When the process started, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl Process {
    /// The figures of this process now.
    pub(super) fn read() -> Process {
        let file = |p: &str| std::fs::read_to_string(p).ok();
        let (resident_bytes, virtual_bytes) =
            file("/proc/self/status").map_or((None, None), |s| memory(&s));
        let stat = file("/proc/self/stat").and_then(|s| stat(&s));
        let boot = file("/proc/stat").and_then(|s| boot_time(&s));
        Process {
            resident_bytes,
            virtual_bytes,
            cpu_seconds: stat.map(|(cpu, _)| cpu as f64 / USER_HZ),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.count() as u64),
            max_fds: file("/proc/self/limits").and_then(|s| max_open_files(&s)),
            start_time_seconds: stat
                .zip(boot)
                .map(|((_, start), boot)| boot as f64 + start as f64 / USER_HZ),
        }
    }

    /// The families of the figures read (none for a figure not read).
    pub(super) fn families(&self) -> Vec<Family> {
        let one = |name, help, ty, value: Option<Value>| {
            value.map(|v| Family {
                name,
                help,
                ty,
                series: vec![Series::new(vec![], v)],
            })
        };
        [
            one(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                Type::Gauge,
                self.resident_bytes.map(Value::Int),
            ),
            one(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                Type::Gauge,
                self.virtual_bytes.map(Value::Int),
            ),
            one(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                Type::Counter,
                self.cpu_seconds.map(Value::Float),
            ),
            one(
                "process_open_fds",
                "Number of open file descriptors",
                Type::Gauge,
                self.open_fds.map(Value::Int),
            ),
            one(
                "process_max_fds",
                "Maximum number of open file descriptors",
                Type::Gauge,
                self.max_fds.map(Value::Int),
            ),
            one(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                Type::Gauge,
                self.start_time_seconds.map(Value::Float),
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// `VmRSS` and `VmSize` of `/proc/self/status`, in bytes (the file gives kB).
fn memory(status: &str) -> (Option<u64>, Option<u64>) {
    let kb = |key: &str| {
        status.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            let n: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            Some(n * 1024)
        })
    };
    (kb("VmRSS"), kb("VmSize"))
}

/// From `/proc/self/stat`: user plus system time, and the start time after boot, both in
/// clock ticks. The command name (field 2, in parentheses) may hold spaces and `)`: the
/// fields are counted from the last `)`.
fn stat(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15, starttime 22.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((field(14)? + field(15)?, field(22)?))
}

/// The boot time of `/proc/stat` (`btime`), seconds since the Unix epoch.
fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits`; `None` when unlimited.
fn max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_are_read() {
        let status = "Name:\tusage-server\nVmPeak:\t  300000 kB\nVmSize:\t  262144 kB\n\
                      VmRSS:\t   10240 kB\nThreads:\t4\n";
        assert_eq!(memory(status), (Some(10240 * 1024), Some(262144 * 1024)));
        assert_eq!(memory("Name:\tx\n"), (None, None));
        // A command name with a space and a `)`.
        let stat_line = "4242 (a) b) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                         250 75 0 0 20 0 4 0 123456 262144000 2560 18446744073709551615";
        assert_eq!(stat(stat_line), Some((325, 123456)));
        assert_eq!(stat("4242 (x) S 1"), None);
        assert_eq!(
            boot_time("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63704                63704                processes \n\
                      Max open files            1024                 1048576              files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(max_open_files(unlimited), None);
    }

    #[test]
    fn a_figure_not_read_has_no_family() {
        let p = Process {
            resident_bytes: Some(5),
            cpu_seconds: Some(1.5),
            ..Process::default()
        };
        let names: Vec<_> = p.families().iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            ["process_resident_memory_bytes", "process_cpu_seconds"]
        );
        assert!(Process::default().families().is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_on_linux() {
        let p = Process::read();
        assert!(p.resident_bytes.unwrap() > 0, "{p:?}");
        assert!(
            p.virtual_bytes.unwrap() >= p.resident_bytes.unwrap(),
            "{p:?}"
        );
        assert!(p.open_fds.unwrap() >= 3, "{p:?}");
        assert!(p.max_fds.is_none_or(|m| m >= p.open_fds.unwrap()), "{p:?}");
        assert!(p.cpu_seconds.unwrap() >= 0.0, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = p.start_time_seconds.unwrap();
        // Started before now, and not a day ago (a test process).
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} {now}"
        );
    }
}
