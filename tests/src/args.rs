//! The benchmarks' command-line options: `--name VALUE`.

/// The value after `--name`, as text.
pub fn text_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The value after `--name`, or `default` when it is not given (or does
/// not read as one).
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    text_arg(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether `--name` is given.
pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}
