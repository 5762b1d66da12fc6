//! The machine the benchmark runs on: pinning to one core, and what the report says about it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Pins this thread (the only one that times anything) to `cpu`, or to the last core this
/// process may use (the first cores take more of the machine's interrupts); the core pinned.
pub(crate) fn pin(cpu: Option<usize>) -> Result<usize, String> {
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid, writable `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    let max = 8 * size;
    // SAFETY: CPU_ISSET reads bit `i < max` of `set`.
    let allowed: Vec<usize> = (0..max)
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect();
    let cpu = match cpu {
        Some(c) if allowed.contains(&c) => c,
        Some(c) => {
            return Err(format!(
                "CPU {c} is not one this process may use: {allowed:?}"
            ));
        }
        None => *allowed.last().ok_or("no CPU allowed")?,
    };
    // SAFETY: as above; CPU_ZERO and CPU_SET write within `one`.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `one` is a valid `cpu_set_t` and `cpu < max`.
    unsafe { libc::CPU_SET(cpu, &mut one) };
    // SAFETY: `one` is a valid `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &one) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(cpu)
}

/// `/proc/cpuinfo`'s model name (and family / model numbers, which a VM may not hide).
pub(crate) fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    format!(
        "{} (family {}, model {})",
        field("model name"),
        field("cpu family"),
        field("model")
    )
}

/// The x86 features that decide which code runs.
pub(crate) fn features() -> String {
    let mut have = Vec::new();
    macro_rules! check {
        ($($f:tt),*) => {$(
            if std::arch::is_x86_feature_detected!($f) {
                have.push($f);
            }
        )*};
    }
    check!(
        "aes",
        "pclmulqdq",
        "avx2",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512vbmi",
        "vaes",
        "vpclmulqdq"
    );
    format!("CPU features: {}", have.join(" "))
}

/// How many CPUs are online.
pub(crate) fn online_cpus() -> i64 {
    // SAFETY: sysconf reads a system value; no memory is passed.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }
}

/// `/proc/loadavg`'s first three figures.
pub(crate) fn load_average() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// The time now, `YYYY-MM-DD HH:MM UTC`.
pub(crate) fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}
