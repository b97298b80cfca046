//! The CLI layer: parses arguments and dispatches.

pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
