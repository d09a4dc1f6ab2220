//! `cargo xtask fuzz [--seconds N | --minutes N] [--target NAME]
//! [--update-corpus]`: every parser that takes input from the network or a
//! user, fed mutated inputs for a bounded time on the stable toolchain.
//!
//! There is no coverage instrumentation on stable Rust, so the fuzzer is
//! guided by outcomes instead: each target answers a short description of
//! what the input did (which error, which shape of success), and an input
//! whose outcome is new joins the working corpus, so mutations explore
//! from every distinct path the parser has shown. The committed seeds are
//! `fuzz/corpus/<target>/`; `--update-corpus` adds the inputs of new
//! outcomes there (a few per target).
//!
//! A panic is a finding: the input is written to
//! `target/fuzz/crashes/<target>/<hash>`, printed, and the run exits 1.
//! So is an input that runs for more than 10 s (a hang). The per-target
//! counts go to `target/fuzz/summary.json`.

use std::collections::{BTreeMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::fuzz_targets::{TARGETS, Target};

/// The largest input the mutator makes.
const MAX_LEN: usize = 4096;
/// Inputs kept in one target's working corpus.
const MAX_CORPUS: usize = 1024;
/// Corpus files `--update-corpus` keeps per target.
const MAX_SAVED: usize = 48;
/// An input running longer than this is a hang.
const HANG: Duration = Duration::from_secs(10);

/// Where the committed seeds live.
fn corpus_dir(target: &str) -> PathBuf {
    Path::new("fuzz/corpus").join(target)
}

/// A small deterministic generator (xorshift64*), seeded per target.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes that often sit on a parser's edges.
const INTERESTING: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'\n', b'/', b':', b'=', b',', b'$', b'(', b')', b'!', b'.', b'-',
    b'~', b'"', b'\\', b'%',
];
/// 32-bit values that often sit on a length's edges.
const INTERESTING_U32: &[u32] = &[0, 1, 2, 7, 8, 0x7f, 0x80, 0xffff, 0x7fff_ffff, 0xffff_ffff];

/// One mutation of `input`: bit flips, interesting bytes and lengths,
/// inserted and deleted runs, the target's dictionary words, and splices
/// with another corpus entry.
fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], dictionary: &[&str]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let len = out.len();
        match rng.below(9) {
            0 if len > 0 => {
                let at = rng.below(len);
                out[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                out[at] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let at = rng.below(len + 1);
                let byte = rng.next() as u8;
                out.insert(at, byte);
            }
            3 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(16)).min(len);
                out.drain(at..end);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(32)).min(len);
                let run: Vec<u8> = out[at..end].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, run);
            }
            5 if !dictionary.is_empty() => {
                let word = dictionary[rng.below(dictionary.len())].as_bytes();
                let at = rng.below(len + 1);
                out.splice(at..at, word.iter().copied());
            }
            6 if len >= 4 => {
                let at = rng.below(len - 3);
                let value = INTERESTING_U32[rng.below(INTERESTING_U32.len())];
                out[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
            7 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(out.len() + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            _ => {
                let at = rng.below(len + 1);
                let bytes: Vec<u8> = (0..=rng.below(8)).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
        }
    }
    out.truncate(MAX_LEN);
    out
}

/// FNV-1a, 64 bits.
fn fnv(input: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in input {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A short stable name for an input.
fn hash(input: &[u8]) -> String {
    format!("{:016x}", fnv(input))
}

/// The input as text for the report: printable ASCII as is, the rest
/// escaped.
fn printable(input: &[u8]) -> String {
    input
        .iter()
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect()
}

/// What one target's run did.
#[derive(Debug, Default)]
struct Outcome {
    executions: u64,
    outcomes: usize,
    corpus: usize,
    crash: Option<(String, PathBuf)>,
}

/// What the watchdog sees of the running input.
#[derive(Default)]
struct Running {
    /// Milliseconds since `epoch` when the current input started; 0 when
    /// none runs.
    started_ms: AtomicU64,
    input: Mutex<Vec<u8>>,
    done: AtomicBool,
}

/// The seeds of `target`: its built-in ones and the committed corpus.
fn seeds(target: &Target) -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = (target.seeds)();
    if let Ok(entries) = std::fs::read_dir(corpus_dir(target.name)) {
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files {
            if let Ok(bytes) = std::fs::read(&file) {
                seeds.push(bytes);
            }
        }
    }
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    seeds
}

/// Run `target` for `budget`, or until it panics or hangs.
fn fuzz_one(target: &'static Target, budget: Duration, update_corpus: bool) -> Outcome {
    let running = Arc::new(Running::default());
    let epoch = Instant::now();
    let worker_running = running.clone();
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name))
        .stack_size(64 << 20)
        .spawn(move || {
            let running = worker_running;
            let mut rng = Rng::new(fnv(target.name.as_bytes()));
            let mut outcome = Outcome::default();
            let mut seen: HashSet<String> = HashSet::new();
            let mut corpus: Vec<Vec<u8>> = Vec::new();
            let mut fresh: Vec<(String, Vec<u8>)> = Vec::new();
            let seeds = seeds(target);
            let mut queue = seeds.clone().into_iter();
            loop {
                let input = match queue.next() {
                    Some(seed) => seed,
                    None => {
                        if epoch.elapsed() >= budget {
                            break;
                        }
                        let pool = if corpus.is_empty() { &seeds } else { &corpus };
                        let base = &pool[rng.below(pool.len())];
                        mutate(&mut rng, base, pool, target.dictionary)
                    }
                };
                *running.input.lock().unwrap_or_else(|e| e.into_inner()) = input.clone();
                running
                    .started_ms
                    .store(epoch.elapsed().as_millis() as u64 + 1, Ordering::SeqCst);
                let answer = std::panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
                running.started_ms.store(0, Ordering::SeqCst);
                outcome.executions += 1;
                match answer {
                    Ok(what) => {
                        if seen.insert(what.clone()) {
                            if corpus.len() < MAX_CORPUS {
                                corpus.push(input.clone());
                            }
                            fresh.push((what, input));
                        }
                    }
                    Err(panic) => {
                        let message = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "a panic".into());
                        let dir = Path::new("target/fuzz/crashes").join(target.name);
                        let path = dir.join(hash(&input));
                        let _ = std::fs::create_dir_all(&dir);
                        let _ = std::fs::write(&path, &input);
                        outcome.crash = Some((
                            format!("{message}\n    input: \"{}\"", printable(&input)),
                            path,
                        ));
                        break;
                    }
                }
            }
            outcome.outcomes = seen.len();
            outcome.corpus = corpus.len();
            if update_corpus && outcome.crash.is_none() {
                save_corpus(target.name, &fresh);
            }
            running.done.store(true, Ordering::SeqCst);
            outcome
        });
    let worker = match worker {
        Ok(w) => w,
        Err(e) => {
            return Outcome {
                crash: Some((
                    format!("cannot start the fuzzing thread: {e}"),
                    PathBuf::new(),
                )),
                ..Outcome::default()
            };
        }
    };
    while !running.done.load(Ordering::SeqCst) && !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(200));
        let started = running.started_ms.load(Ordering::SeqCst);
        if started > 0 {
            let took = epoch
                .elapsed()
                .saturating_sub(Duration::from_millis(started - 1));
            if took > HANG {
                let input = running
                    .input
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                let dir = Path::new("target/fuzz/crashes").join(target.name);
                let path = dir.join(format!("hang-{}", hash(&input)));
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(&path, &input);
                eprintln!(
                    "fuzz: {}: an input ran for more than {HANG:?} (saved as {})\n    input: \"{}\"",
                    target.name,
                    path.display(),
                    printable(&input)
                );
                // The thread cannot be stopped; the process ends here.
                std::process::exit(1);
            }
        }
    }
    worker.join().unwrap_or_else(|_| Outcome {
        crash: Some(("the fuzzing thread died".into(), PathBuf::new())),
        ..Outcome::default()
    })
}

/// Keep up to [`MAX_SAVED`] of the inputs whose outcomes were new, the
/// smallest first, as committed seeds.
fn save_corpus(target: &str, fresh: &[(String, Vec<u8>)]) {
    let dir = corpus_dir(target);
    let existing = std::fs::read_dir(&dir).map_or(0, |d| d.count());
    let mut inputs: Vec<&Vec<u8>> = fresh.iter().map(|(_, i)| i).collect();
    inputs.sort_by_key(|i| i.len());
    let saved = std::fs::create_dir_all(&dir).and_then(|()| {
        for input in inputs.into_iter().take(MAX_SAVED.saturating_sub(existing)) {
            std::fs::write(dir.join(hash(input)), input)?;
        }
        Ok(())
    });
    if let Err(e) = saved {
        eprintln!(
            "fuzz: {target}: cannot save the corpus in {}: {e}",
            dir.display()
        );
    }
}

/// The task.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let mut seconds: Option<u64> = None;
    let mut only: Option<String> = None;
    let mut update_corpus = false;
    let mut list = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let parsed = match arg.as_str() {
            "--seconds" => value("--seconds").and_then(|v| {
                v.parse::<u64>()
                    .map(|s| seconds = Some(s))
                    .map_err(|e| format!("--seconds: {e}"))
            }),
            "--minutes" => value("--minutes").and_then(|v| {
                v.parse::<u64>()
                    .map(|m| seconds = Some(m * 60))
                    .map_err(|e| format!("--minutes: {e}"))
            }),
            "--target" => value("--target").map(|t| only = Some(t)),
            "--update-corpus" => {
                update_corpus = true;
                Ok(())
            }
            "--list" => {
                list = true;
                Ok(())
            }
            other => Err(format!("unknown option {other:?}")),
        };
        if let Err(e) = parsed {
            eprintln!(
                "fuzz: {e}\nusage: cargo xtask fuzz [--seconds N | --minutes N] [--target NAME] [--update-corpus] [--list]"
            );
            return ExitCode::from(2);
        }
    }
    if list {
        for t in TARGETS {
            println!("{:<22} {}", t.name, t.about);
        }
        return ExitCode::SUCCESS;
    }
    let targets: Vec<&'static Target> = TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == t.name))
        .collect();
    if targets.is_empty() {
        eprintln!(
            "fuzz: no target named {:?} (see --list)",
            only.unwrap_or_default()
        );
        return ExitCode::from(2);
    }
    let total = Duration::from_secs(seconds.unwrap_or(60));
    let each = total / targets.len() as u32;
    // Panics are findings, reported once by the fuzzer, not by the hook.
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    let mut summary = BTreeMap::new();
    let mut crashed = 0;
    println!(
        "fuzz: {} targets, {:.1} s each",
        targets.len(),
        each.as_secs_f64()
    );
    for target in targets {
        let outcome = fuzz_one(target, each, update_corpus);
        let verdict = match &outcome.crash {
            None => "ok".to_owned(),
            Some((message, path)) => {
                crashed += 1;
                format!("PANIC (saved as {}): {message}", path.display())
            }
        };
        println!(
            "  {:<22} {:>9} runs {:>5} outcomes {:>5} corpus  {verdict}",
            target.name, outcome.executions, outcome.outcomes, outcome.corpus
        );
        summary.insert(
            target.name,
            serde_json::json!({
                "executions": outcome.executions,
                "distinct_outcomes": outcome.outcomes,
                "corpus": outcome.corpus,
                "crashed": outcome.crash.is_some(),
            }),
        );
    }
    let _ = std::panic::take_hook();
    let report = serde_json::json!({
        "seconds": started.elapsed().as_secs_f64(),
        "targets": summary,
        "crashes": crashed,
    });
    let _ = std::fs::create_dir_all("target/fuzz");
    if let Ok(text) = serde_json::to_string_pretty(&report) {
        let _ = std::fs::write("target/fuzz/summary.json", text);
    }
    println!(
        "fuzz: {} passed, {crashed} failed ({:.0} s; target/fuzz/summary.json)",
        report["targets"].as_object().map_or(0, |t| t.len()) - crashed,
        started.elapsed().as_secs_f64()
    );
    if crashed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_bounded_and_vary() {
        let mut rng = Rng::new(7);
        let seed = b"app=web,tier in (a,b)".to_vec();
        let corpus = vec![seed.clone(), vec![0; MAX_LEN]];
        let mut distinct = HashSet::new();
        for _ in 0..2000 {
            let m = mutate(&mut rng, &seed, &corpus, &["notin", "!"]);
            assert!(m.len() <= MAX_LEN);
            distinct.insert(m);
        }
        assert!(distinct.len() > 1000, "{}", distinct.len());
    }

    #[test]
    fn every_target_survives_its_seeds() {
        for target in TARGETS {
            for seed in (target.seeds)() {
                let _ = (target.run)(&seed);
            }
        }
    }
}
