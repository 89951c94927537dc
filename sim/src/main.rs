//! `lethe-sim`: runs seeded worlds (see the library's documentation) and reports the first that
//! breaks an invariant, with the command that replays it and its trace.

use std::time::Instant;

use clap::Parser;

/// Deterministic simulation of lethe's data-jobs API and reconciler.
#[derive(Parser)]
#[command(name = "lethe-sim")]
struct Args {
    /// How many seeds to run, starting at `--first-seed`.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Run only this seed and print its whole trace.
    #[arg(long)]
    seed: Option<u64>,
    /// Steps per world before it quiesces.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Worker threads (each runs whole seeds; a seed's run never depends on them).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if let Some(seed) = args.seed {
        let outcome = lethe_sim::run(seed, args.steps);
        for line in &outcome.trace {
            println!("{line}");
        }
        return match outcome.violation {
            Some(v) => {
                println!("seed {seed}: VIOLATION: {v}");
                std::process::ExitCode::FAILURE
            }
            None => {
                println!("seed {seed}: ok ({} steps)", outcome.steps);
                std::process::ExitCode::SUCCESS
            }
        };
    }
    let threads = args
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .max(1);
    let started = Instant::now();
    let summary = lethe_sim::run_seeds(args.first_seed, args.seeds, args.steps, threads);
    let elapsed = started.elapsed().as_secs_f64();
    match summary.failure {
        Some(outcome) => {
            // The shortest prefix of the schedule that still fails is the one to read.
            let (steps, outcome) =
                lethe_sim::shrink(outcome.seed, args.steps).unwrap_or((args.steps, outcome));
            let tail = outcome.trace.len().saturating_sub(80);
            for line in &outcome.trace[tail..] {
                println!("{line}");
            }
            println!(
                "seed {}: VIOLATION: {}",
                outcome.seed,
                outcome.violation.unwrap_or_default()
            );
            println!(
                "replay: cargo run -p lethe-sim -- --seed {} --steps {steps}",
                outcome.seed
            );
            std::process::ExitCode::FAILURE
        }
        None => {
            println!(
                "{} seeds passed ({} steps) in {elapsed:.1} s on {threads} threads: {:.0} schedules/s, {:.0} steps/s",
                summary.seeds,
                summary.steps,
                summary.seeds as f64 / elapsed,
                summary.steps as f64 / elapsed
            );
            std::process::ExitCode::SUCCESS
        }
    }
}
