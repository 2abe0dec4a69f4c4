//! Writes a batch of sentences and its embeddings as `.npy` files, for
//! checking another implementation of all-MiniLM-L6-v2 against this one
//! (`scripts/onnx_models.py` runs a PyTorch ONNX export of the model
//! through `tgc run` on these inputs):
//!
//! ```text
//! cargo run --release -p tgc-minilm --example embed_npy -- OUT_DIR SENTENCE...
//! ```
//!
//! - `OUT_DIR/input_ids.npy`: `i32[B, S]`, each sentence's token ids
//!   (`[CLS] … [SEP]`) padded with 0 to the longest, `S`;
//! - `OUT_DIR/attention_mask.npy`: `i32[B, S]`, 1 on a token, 0 on padding;
//! - `OUT_DIR/embeddings.npy`: `f32[B, 384]`, [`MiniLm::embed_ids`] of the
//!   ids (mean-pooled, L2-normalised).
//!
//! The model is read as `minilm` reads it (`.models/minilm` or
//! `$TGC_MINILM_DIR`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tgc_minilm::{default_model_dir, MiniLm};
use tgc_runtime::{npy, DType, HostTensor};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, sentences)) = args.split_first().filter(|(_, s)| !s.is_empty()) else {
        eprintln!("usage: embed_npy OUT_DIR SENTENCE...");
        return ExitCode::FAILURE;
    };
    let sentences: Vec<&str> = sentences.iter().map(String::as_str).collect();
    match run(Path::new(dir), &sentences) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("embed_npy: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &Path, sentences: &[&str]) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let model = MiniLm::load(&default_model_dir())?;
    let ids = model.tokenize(sentences)?;
    let embeddings = model.embed_ids(&ids)?;
    let (b, s) = (ids.len(), ids.iter().map(Vec::len).max().unwrap_or(1));
    let mut tokens = vec![0.0; b * s];
    let mut mask = vec![0.0; b * s];
    for (r, sentence) in ids.iter().enumerate() {
        for (p, &id) in sentence.iter().enumerate() {
            tokens[r * s + p] = f64::from(id);
            mask[r * s + p] = 1.0;
        }
    }
    let hidden = embeddings.first().map_or(0, Vec::len);
    let flat: Vec<f64> = embeddings.iter().flatten().map(|&v| f64::from(v)).collect();
    std::fs::create_dir_all(dir)?;
    let files = [
        ("input_ids.npy", HostTensor::from_f64(DType::I32, &[b, s], &tokens)?),
        ("attention_mask.npy", HostTensor::from_f64(DType::I32, &[b, s], &mask)?),
        ("embeddings.npy", HostTensor::from_f64(DType::F32, &[b, hidden], &flat)?),
    ];
    let mut written = Vec::new();
    for (name, t) in files {
        let path = dir.join(name);
        npy::write_npy(&path, &t)?;
        written.push(path);
    }
    Ok(written)
}
