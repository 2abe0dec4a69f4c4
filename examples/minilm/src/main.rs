//! Embeds the sentences given on the command line with all-MiniLM-L6-v2
//! (tgc-compiled CPU kernels) and prints their pairwise cosine similarities.
//!
//! ```text
//! cargo run --release -p tgc-minilm -- "A man is eating food." "A man is riding a horse."
//! ```
//!
//! With no arguments it embeds a few built-in sentences. The model is read
//! from `.models/minilm` (installed by `scripts/setup.sh`) or
//! `$TGC_MINILM_DIR`.

use std::process::ExitCode;
use std::time::Instant;

use tgc_minilm::{cosine, default_model_dir, MiniLm};

const DEFAULT_SENTENCES: [&str; 4] = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "A man is riding a horse.",
    "The new movie is awesome.",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: minilm [SENTENCE ...]\nprints the pairwise cosine similarities of the sentences' embeddings");
        return ExitCode::SUCCESS;
    }
    let sentences: Vec<&str> =
        if args.is_empty() { DEFAULT_SENTENCES.to_vec() } else { args.iter().map(String::as_str).collect() };
    match run(&sentences) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("minilm: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(sentences: &[&str]) -> Result<(), tgc_minilm::MiniLmError> {
    let dir = default_model_dir();
    let dir = dir.canonicalize().unwrap_or(dir);
    let model = MiniLm::load(&dir)?;
    let start = Instant::now();
    let embeddings = model.embed(sentences)?;
    let elapsed = start.elapsed();
    println!(
        "all-MiniLM-L6-v2 on tgc CPU kernels: {} sentences embedded in {:.1} ms (model: {})",
        sentences.len(),
        elapsed.as_secs_f64() * 1e3,
        dir.display()
    );
    for (i, s) in sentences.iter().enumerate() {
        println!("[{i}] {s}");
    }
    println!("cosine similarities:");
    print!("     ");
    for j in 0..sentences.len() {
        print!(" {:>6}", format!("[{j}]"));
    }
    println!();
    for (i, a) in embeddings.iter().enumerate() {
        print!("{:>5}", format!("[{i}]"));
        for b in &embeddings {
            print!(" {:>6.3}", cosine(a, b));
        }
        println!();
    }
    Ok(())
}
