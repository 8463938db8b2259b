//! The `mdf` binary: a thin shell over the library's CLI module.
fn main() -> std::process::ExitCode {
    mdf::cli::main()
}
