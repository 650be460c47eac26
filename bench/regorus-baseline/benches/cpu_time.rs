//! A criterion measurement of the benchmark thread's own CPU time (the thread CPU clock). On a
//! machine busy with other work, wall time counts the time the thread waited for a core; CPU time
//! does not, so figures taken side by side stay comparable.

use criterion::Throughput;
use criterion::measurement::{Measurement, ValueFormatter};

/// Thread CPU time in nanoseconds.
pub struct CpuTime;

fn now_ns() -> u64 {
    u64::try_from(cpu_time::ThreadTime::now().as_duration().as_nanos()).unwrap_or(u64::MAX)
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        now_ns()
    }
    fn end(&self, start: u64) -> u64 {
        now_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &NanosFormatter
    }
}

struct NanosFormatter;

fn unit(typical_ns: f64) -> (f64, &'static str) {
    if typical_ns < 1e3 {
        (1.0, "ns (cpu)")
    } else if typical_ns < 1e6 {
        (1e3, "µs (cpu)")
    } else if typical_ns < 1e9 {
        (1e6, "ms (cpu)")
    } else {
        (1e9, "s (cpu)")
    }
}

impl ValueFormatter for NanosFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (d, u) = unit(typical);
        values.iter_mut().for_each(|v| *v /= d);
        u
    }
    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let bytes = match throughput {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => *b as f64,
            Throughput::Bits(b) => *b as f64 / 8.0,
            Throughput::Elements(e) | Throughput::ElementsAndBytes { elements: e, .. } => *e as f64,
        };
        values
            .iter_mut()
            .for_each(|v| *v = bytes * 1e9 / *v / (1024.0 * 1024.0));
        "MiB/s (cpu)"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
