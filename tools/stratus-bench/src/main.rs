//! `stratus-bench <suite> [options]` (what `cargo xtask bench` runs, in
//! release): one benchmark suite, its ratios in `target/bench/<suite>.json`.

// The heap meter counts what the controllers under test allocate; it is
// this binary's allocator and no other task's.
#[global_allocator]
static ALLOCATOR: stratus_bench::heap_meter::HeapMeter = stratus_bench::heap_meter::HeapMeter;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    stratus_bench::run(&args)
}
