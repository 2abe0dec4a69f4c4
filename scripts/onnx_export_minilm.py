"""Exports sentence-transformers' all-MiniLM-L6-v2 — the weights
examples/minilm reads, from `.models/minilm` — to ONNX with PyTorch's
exporter, as a user would: the BERT encoder, then mean pooling over the
attention mask and L2 normalisation (sentence-transformers' `Pooling` and
`Normalize` modules), so that the graph's output is the sentence embedding.
The batch and the sequence length are symbols (`batch`, `sequence`).

    python3 scripts/onnx_export_minilm.py MODEL_DIR OUT.onnx

Run by scripts/onnx_models.sh, with PyTorch and transformers installed
into .toolchain/torch; scripts/onnx_models.py then runs the export through
`tgc run` against examples/minilm's embeddings of the same sentences.
"""

import sys

import torch
import transformers


class SentenceEmbedding(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2.0, dim=1)


def main():
    src, out = sys.argv[1], sys.argv[2]
    bert = transformers.BertModel.from_pretrained(src, add_pooling_layer=False).eval()
    ids = torch.ones(2, 8, dtype=torch.int64)
    mask = torch.ones(2, 8, dtype=torch.int64)
    symbols = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            SentenceEmbedding(bert),
            (ids, mask),
            out,
            input_names=["input_ids", "attention_mask"],
            output_names=["embeddings"],
            dynamic_axes={"input_ids": symbols, "attention_mask": symbols, "embeddings": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
