//! psyche-fuzz: see programs/README.md, "Fuzzing".
//!
//! ```text
//! cargo run --release -p psyche-fuzz -- --program coordinator --iterations 1000000
//! cargo run --release -p psyche-fuzz -- --program all --iterations 20000 --no-save   # the CI pass
//! cargo run --release -p psyche-fuzz -- --repro fuzz/findings/<file>.bin             # one input, with logs
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use psyche_fuzz::fuzz::{load_env, Fuzzer, Options};
use psyche_fuzz::worlds::Program;

const USAGE: &str = "usage: psyche-fuzz [--program coordinator|authorizer|treasurer|competition|all] [--iterations N] [--seed S]
                   [--mutate PERCENT] [--no-save] [--interpreted] [--deploy DIR] [--corpus DIR]
                   [--findings DIR] [--repro FILE] [--cu-repro MEMBERS] [-v]";

fn main() -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut programs = Program::all().to_vec();
    let mut iterations = 20_000u64;
    let mut seed = 1u64;
    let mut mutate = 30u64;
    let mut save = true;
    let mut interpreted = false;
    let mut deploy = root.join("../target/deploy");
    let mut corpus = root.join("corpus");
    let mut findings = root.join("findings");
    let mut repro = None;
    let mut verbose = false;
    let mut cu_repro = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value\n{USAGE}"));
        match a.as_str() {
            "--program" | "-p" => {
                let v = val();
                programs = if v == "all" { Program::all().to_vec() } else { vec![Program::parse(&v).unwrap_or_else(|| panic!("unknown program {v}"))] };
            }
            "--iterations" | "-n" => iterations = val().replace('_', "").parse().expect("--iterations N"),
            "--seed" => seed = val().parse().expect("--seed S"),
            "--mutate" => mutate = val().parse().expect("--mutate PERCENT"),
            "--no-save" => save = false,
            "--interpreted" => interpreted = true,
            "--deploy" => deploy = PathBuf::from(val()),
            "--corpus" => corpus = PathBuf::from(val()),
            "--findings" => findings = PathBuf::from(val()),
            "--repro" => repro = Some(PathBuf::from(val())),
            "--cu-repro" => cu_repro = Some(val().parse::<u16>().expect("--cu-repro MEMBERS")),
            "-v" | "--verbose" => verbose = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("unknown argument {a}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let env = match load_env(&deploy) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("psyche-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = |program| Options {
        program,
        iterations,
        seed,
        corpus_dir: corpus.clone(),
        findings_dir: findings.clone(),
        save_corpus: save,
        interpreted,
        mutate_percent: mutate,
        reset_every: 20_000,
        max_corpus_bytes: 300 * 1024,
        verbose,
    };
    if let Some(n) = cu_repro {
        let path = psyche_fuzz::repro::cooldown_tick(n).save(&findings);
        println!("wrote {}", path.display());
        repro = Some(path);
    }
    if let Some(path) = repro {
        let mut f = Fuzzer::new(opts(Program::Coordinator), env);
        return match f.reproduce(&path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        };
    }
    let mut failed = false;
    let mut env = Some(env);
    for program in programs {
        let e = env.take().map(Ok).unwrap_or_else(|| load_env(&deploy)).expect("programs loaded once already");
        let mut f = Fuzzer::new(opts(program), e);
        f.run();
        failed |= psyche_fuzz::report::print(&f);
        env = Some(f.env);
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
