//! The end-of-run report.

use crate::fuzz::Fuzzer;

/// Prints the figures of one program's run; true when something was found.
pub fn print(f: &Fuzzer) -> bool {
    let s = &f.stats;
    let name = f.opts.program.name();
    let total = s.executions + s.support + s.replayed;
    println!(
        "{name}: {} executions ({} generated, {} mutated; {} corpus replays; {} support instructions) in {:.1} s: {:.0} exec/s ({:.0} instructions/s in all)",
        s.executions,
        s.executions - s.mutated,
        s.mutated,
        s.replayed,
        s.support,
        s.seconds,
        s.executions as f64 / s.seconds.max(1e-9),
        total as f64 / s.seconds.max(1e-9),
    );
    println!(
        "  outcomes: {} ok, {} program errors, {} refused by the runtime, {} violations, {} crashes, {} invariant failures",
        s.ok, s.program_errors, s.refused, s.violations, s.crashes, s.invariant_failures
    );
    println!("  coverage: {} (program, instruction, outcome, run state) combinations; {} corpus entries added", s.coverage.len(), s.corpus_added);
    println!("  run states reached: {}", s.states.iter().cloned().collect::<Vec<_>>().join(", "));
    if f.opts.verbose {
        println!("  successes by instruction (max CU):");
        for (k, v) in &s.successes {
            println!("    {k}: {v} ({} CU)", s.max_cu.get(k).copied().unwrap_or(0));
        }
        println!("  errors:");
        for (k, v) in &s.errors {
            println!("    {k}: {v}");
        }
    }
    for (k, v) in &s.dirty_errors {
        println!("  note: error after writes, rolled back on chain ({v}x): {k}");
    }
    for k in &s.high_cu {
        println!("  note: {k}");
    }
    for k in &s.findings {
        println!("  FINDING: {k}");
    }
    !s.findings.is_empty()
}
