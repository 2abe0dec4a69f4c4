//! all-MiniLM-L6-v2 sentence embeddings on the CPU, per batch × sequence
//! bucket: tgc's compiled encoder (`tgc-minilm`) and, in the same run,
//! candle-transformers' BERT on the same safetensors file and the same
//! padded token ids, with the same mean pooling and L2 normalisation.
//!
//! ```text
//! cargo run --release --locked --manifest-path bench/Cargo.toml [-- RUNS]
//! ```
//!
//! For each bucket it fills the whole batch with sentences of the bucket's
//! full length, checks that the two agree, then prints the median latency
//! of RUNS (default 3) timed calls after one warm-up and the sentences per
//! second it gives. tgc's kernels run on `$TGC_NUM_THREADS` threads and
//! candle's on `$RAYON_NUM_THREADS` (each defaults to the available cores);
//! set both to compare at equal thread counts:
//!
//! ```text
//! TGC_NUM_THREADS=1 RAYON_NUM_THREADS=1 cargo run --release --locked --manifest-path bench/Cargo.toml
//! ```

use std::process::ExitCode;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tgc_minilm::{default_model_dir, MiniLm, TokenIds, BUCKETS, HIDDEN};

type BoxError = Box<dyn std::error::Error>;

/// The text the benchmark sentences are cut from.
const TEXT: &str = "Deep learning compilers turn tensor graphs into fused loop nests, \
    checking shapes at build time and generating code with a typed interface; \
    sentence embeddings from a small transformer are a common workload for them, \
    used for semantic search, clustering and deduplication of short texts.";

fn main() -> ExitCode {
    let runs = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 3,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: tgc-minilm-bench [RUNS (a positive integer, default 3)]");
            return ExitCode::FAILURE;
        }
    };
    match run(runs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tgc-minilm-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The candle peer: BERT from candle-transformers plus pooling.
struct Candle {
    model: BertModel,
    device: Device,
}

impl Candle {
    fn load(dir: &std::path::Path) -> Result<Candle, BoxError> {
        let config: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
        let device = Device::Cpu;
        // SAFETY: the weights file is not modified while it is mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &device)? };
        Ok(Candle { model: BertModel::load(vb, &config)?, device })
    }

    /// Embeddings of a padded `b × s` batch (`ids` and `mask` row-major).
    fn embed(&self, ids: &[u32], mask: &[u32], b: usize, s: usize) -> Result<Vec<Vec<f32>>, BoxError> {
        let ids = Tensor::from_slice(ids, (b, s), &self.device)?;
        let mask = Tensor::from_slice(mask, (b, s), &self.device)?;
        let hidden = self.model.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let mean = hidden.broadcast_mul(&m)?.sum(1)?.broadcast_div(&m.sum(1)?)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        Ok(mean.broadcast_div(&norm)?.to_vec2::<f32>()?)
    }
}

/// The median of `runs` timed calls of `f` after one warm-up, in seconds.
fn median_secs(runs: usize, mut f: impl FnMut() -> Result<(), BoxError>) -> Result<f64, BoxError> {
    f()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn run(runs: usize) -> Result<(), BoxError> {
    let dir = default_model_dir();
    let tgc = MiniLm::load(&dir)?;
    let candle = Candle::load(&dir)?;
    let words: Vec<&str> = TEXT.split_whitespace().collect();
    println!("all-MiniLM-L6-v2, CPU, median of {runs} runs after a warm-up; full buckets (every sentence padded to S)");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = |var: &str| -> String {
        match std::env::var(var).ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&n| n >= 1) {
            Some(n) => format!("{n} ({var})"),
            None => format!("{cores} (the available cores)"),
        }
    };
    println!(
        "tgc: generated C, {} threads; candle-transformers 0.11: {} threads",
        threads("TGC_NUM_THREADS"),
        threads("RAYON_NUM_THREADS")
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "B x S", "tgc ms", "tgc sent/s", "candle ms", "candle sent/s", "max |diff|"
    );
    for (b, s) in BUCKETS {
        // b sentences of exactly s tokens: [CLS] words… [SEP], each row a
        // different rotation of the text.
        let mut batch: Vec<TokenIds> = Vec::with_capacity(b);
        for r in 0..b {
            let text: Vec<&str> = words.iter().cycle().skip(r * 3).take(2 * s).copied().collect();
            let mut ids = tgc.tokenize(&[&text.join(" ")])?.remove(0);
            let sep = *ids.last().ok_or("empty tokenisation")?;
            ids.truncate(s - 1);
            ids.push(sep);
            batch.push(ids);
        }
        let flat: Vec<u32> = batch.iter().flatten().copied().collect();
        let mask = vec![1u32; b * s];

        let ours = tgc.embed_padded(&batch, b, s)?;
        let peer = candle.embed(&flat, &mask, b, s)?;
        let diff =
            ours.iter().flatten().zip(peer.iter().flatten()).map(|(&x, &y)| (x - y).abs()).fold(0.0f32, f32::max);
        if ours.len() != b || peer.len() != b || peer.iter().any(|e| e.len() != HIDDEN) || diff > 1e-3 {
            return Err(format!("tgc and candle disagree at {b} x {s}: max abs diff {diff}").into());
        }
        let t_tgc = median_secs(runs, || {
            tgc.embed_padded(&batch, b, s)?;
            Ok(())
        })?;
        let t_candle = median_secs(runs, || {
            candle.embed(&flat, &mask, b, s)?;
            Ok(())
        })?;
        println!(
            "{:>8} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>10.1e}",
            format!("{b}x{s}"),
            t_tgc * 1e3,
            b as f64 / t_tgc,
            t_candle * 1e3,
            b as f64 / t_candle,
            diff
        );
    }
    Ok(())
}
