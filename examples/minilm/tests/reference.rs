//! The tgc-compiled encoder against an independent NumPy implementation of
//! all-MiniLM-L6-v2 (`reference/minilm_ref.py`, float64, each sentence alone
//! with no padding), and a semantic check. Needs the model and NumPy that
//! `scripts/setup.sh` installs (`.models/minilm`, `.toolchain/py`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tgc_minilm::{cosine, default_model_dir, MiniLm, MiniLmError, TokenIds, BUCKETS, HIDDEN};

/// 22 sentences of 3 to 27 tokens (with `[CLS]` and `[SEP]`).
const SENTENCES: [&str; 22] = [
    "Hi.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "A man is riding a horse.",
    "The new movie is awesome.",
    "The cat sits outside.",
    "A woman is playing the violin in a small concert hall.",
    "Two men pushed carts through the woods.",
    "The quick brown fox jumps over the lazy dog.",
    "I love pasta!",
    "Rust gives memory safety without garbage collection.",
    "Kernels are generated at build time.",
    "What is the capital city of France, and how many people live there today?",
    "Yes",
    "The stock market fell sharply after the announcement of new tariffs on imported steel and aluminium.",
    "Ünïcödé characters and accents are normalised by the tokenizer.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "Deep learning compilers lower tensor graphs through several intermediate representations, \
     fuse elementwise operations into loop nests and emit typed code.",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load() -> MiniLm {
    let dir = default_model_dir();
    match MiniLm::load(&dir) {
        Ok(m) => m,
        Err(e) => panic!("{e} (model folder {}: run `bash scripts/setup.sh` first)", dir.display()),
    }
}

/// The NumPy reference's embeddings of `ids`.
fn reference(ids: &[TokenIds]) -> Vec<Vec<f64>> {
    let root = repo_root();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/minilm_ref.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(default_model_dir().join("model.safetensors"))
        .env("PYTHONPATH", root.join(".toolchain/py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let request = serde_json::json!({ "input_ids": ids });
    child.stdin.take().expect("stdin").write_all(request.to_string().as_bytes()).expect("write ids");
    let out = child.wait_with_output().expect("python3 finishes");
    assert!(out.status.success(), "the NumPy reference failed: {}", out.status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("reference JSON");
    v["embeddings"]
        .as_array()
        .expect("embeddings")
        .iter()
        .map(|e| e.as_array().expect("row").iter().map(|x| x.as_f64().expect("number")).collect())
        .collect()
}

/// Max abs difference per component and cosine, both asserted.
fn assert_close(what: &str, got: &[Vec<f32>], want: &[Vec<f64>]) -> (f64, f64) {
    assert_eq!(got.len(), want.len(), "{what}: sentence count");
    let (mut worst_diff, mut worst_cos) = (0.0f64, 1.0f64);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), HIDDEN);
        assert_eq!(w.len(), HIDDEN);
        let diff = g.iter().zip(w).map(|(&a, &b)| (a as f64 - b).abs()).fold(0.0, f64::max);
        let dot: f64 = g.iter().zip(w).map(|(&a, &b)| a as f64 * b).sum();
        let ng = g.iter().map(|&a| a as f64 * a as f64).sum::<f64>().sqrt();
        let nw = w.iter().map(|&b| b * b).sum::<f64>().sqrt();
        let cos = dot / (ng * nw);
        assert!(diff <= 1e-4, "{what}: sentence {i}: max abs diff {diff:e} > 1e-4");
        assert!(cos >= 0.99999, "{what}: sentence {i}: cosine {cos} < 0.99999");
        worst_diff = worst_diff.max(diff);
        worst_cos = worst_cos.min(cos);
    }
    println!("{what}: {} sentences, max abs diff {worst_diff:.2e}, min cosine {worst_cos:.8}", got.len());
    (worst_diff, worst_cos)
}

#[test]
fn embeddings_match_the_numpy_reference() {
    let model = load();
    let ids = model.tokenize(&SENTENCES).expect("tokenize");
    let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
    assert!(lens.iter().all(|&l| l <= 32), "every sentence fits the 8 × 32 bucket: {lens:?}");
    assert!(lens.iter().min() < lens.iter().max(), "lengths differ, so batches are padded: {lens:?}");
    println!("token counts: {lens:?}");
    let want = reference(&ids);

    // Batches of 8, 8 and 6 sentences as long as their longest: each runs
    // the 8 × 32 bucket, padded by the encoder.
    let got = model.embed_ids(&ids).expect("embed");
    assert_close("8 × 32 buckets, padded", &got, &want);

    // One short sentence alone: the 1 × 16 bucket, padded.
    assert!(lens[1] < 16);
    let one = model.embed_ids(&ids[1..2]).expect("embed one");
    assert_close("1 × 16 bucket", &one, &want[1..2]);

    // Exactly a bucket, padded by hand: 8 × 32.
    let exact = model.embed_padded(&ids[..8], 8, 32).expect("embed 8 × 32");
    assert_close("8 × 32 exactly", &exact, &want[..8]);

    // A batch of 9 fits no bucket (at most 8): the generic kernel, at 9 × 27.
    assert!(BUCKETS.iter().all(|&(b, _)| b < 9));
    let last = ids.len() - 9;
    let generic = model.embed_padded(&ids[last..], 9, 27).expect("embed generic");
    assert_close("generic 9 × 27", &generic, &want[last..]);
}

#[test]
fn eating_food_is_closer_to_bread_than_to_riding() {
    let model = load();
    let e = model
        .embed(&["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse."])
        .expect("embed");
    let (bread, horse) = (cosine(&e[0], &e[1]), cosine(&e[0], &e[2]));
    println!("cos(food, bread) = {bread:.4}, cos(food, horse) = {horse:.4}");
    assert!(bread > horse + 0.3, "food~bread {bread} should exceed food~horse {horse} clearly");
}

#[test]
fn too_large_a_batch_is_an_error_not_a_panic() {
    let model = load();
    let ids = vec![vec![101, 102]; 3];
    let input_error = |r: Result<Vec<Vec<f32>>, MiniLmError>| matches!(r, Err(MiniLmError::Input(_)));
    assert!(input_error(model.embed_padded(&ids, 2, 16)), "3 sentences in a batch of 2");
    assert!(input_error(model.embed_padded(&[vec![101, 999_999, 102]], 1, 16)), "token id outside the vocabulary");
    assert!(input_error(model.embed_padded(&[vec![101; 20]], 1, 16)), "20 tokens in a sequence of 16");
}
