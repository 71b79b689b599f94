//! The machine a report was measured on: nproc, CPU model, kernel, memory.

use std::process::Command;

#[derive(Debug)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub memory: String,
}

impl Machine {
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        let kernel = Command::new("uname")
            .arg("-srm")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
            .unwrap_or_else(|| "unknown".to_owned());
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model,
            kernel,
            memory,
        }
    }
}
