fn main() -> std::process::ExitCode {
    spectr::cli::main()
}
