//! The process collector operators alert on, with the names client_golang's
//! gives every Go component: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//! `process_open_fds`, `process_max_fds` and `process_start_time_seconds`,
//! read from `/proc/self` on each scrape (Linux; elsewhere nothing is
//! reported).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Reads this process's figures on each scrape.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use stratus_runtime::metrics::{ProcessCollector, encode_text};
///
/// let mut registry = Registry::default();
/// ProcessCollector::register(&mut registry);
/// let text = encode_text(&registry).unwrap();
/// assert!(text.contains("process_resident_memory_bytes "));
/// assert!(text.contains("process_cpu_seconds_total "));
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessCollector;

impl ProcessCollector {
    /// Register the collector into `registry`.
    pub fn register(registry: &mut Registry) {
        registry.register_collector(Box::new(Self));
    }
}

/// The figures of one scrape.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    open_fds: f64,
    max_fds: f64,
    start_time_seconds: f64,
}

/// Clock ticks per second (`USER_HZ`, 100 on every Linux architecture
/// Stratus builds for) and the page size.
const TICKS: f64 = 100.0;
const PAGE: f64 = 4096.0;

/// Parse `/proc/self/stat` (utime 14, stime 15, starttime 22, vsize 23,
/// rss 24, counted from 1), with the boot time from `/proc/stat`.
fn from_stat(stat: &str, boot_time: f64) -> Option<Figures> {
    // Fields after the command name (which may hold spaces) start after ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Field n of the line is fields[n - 3].
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    Some(Figures {
        cpu_seconds: (field(14)? + field(15)?) / TICKS,
        start_time_seconds: boot_time + field(22)? / TICKS,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)? * PAGE,
        ..Figures::default()
    })
}

/// The soft limit of open files, from `/proc/self/limits`.
fn max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn read() -> Option<Figures> {
    let boot_time = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok())?;
    let mut figures = from_stat(&std::fs::read_to_string("/proc/self/stat").ok()?, boot_time)?;
    figures.open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
    figures.max_fds = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| max_fds(&l))
        .unwrap_or_default();
    Some(figures)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(f) = read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(f.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            cpu.metric_type(),
        )?)?;
        for (name, help, value) in [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                f.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                f.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                f.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                f.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                f.start_time_seconds,
            ),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_past_a_command_with_spaces() {
        // pid (comm) state ppid ... utime=250 stime=50 ... starttime=1000
        // vsize=8192000 rss=300
        let stat = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 8192000 300 18446744073709551615";
        let f = from_stat(stat, 1_700_000_000.0).unwrap();
        assert_eq!(f.cpu_seconds, 3.0);
        assert_eq!(f.start_time_seconds, 1_700_000_010.0);
        assert_eq!(f.virtual_bytes, 8_192_000.0);
        assert_eq!(f.resident_bytes, 300.0 * 4096.0);
        assert_eq!(from_stat("garbage", 0.0), None);
    }

    #[test]
    fn the_open_files_limit_is_the_soft_one() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_fds(limits), Some(1024.0));
        assert_eq!(max_fds("nothing"), None);
    }

    #[test]
    fn this_process_is_reported() {
        let mut registry = Registry::default();
        ProcessCollector::register(&mut registry);
        let text = crate::metrics::encode_text(&registry).unwrap();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} "))?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert!(value("process_resident_memory_bytes") > 1_000_000.0);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started}"
        );
        assert!(
            text.contains("# TYPE process_cpu_seconds counter"),
            "{text}"
        );
    }
}
