//! The descriptors of token and transformer models (section 7.4 of the reference README):
//! `Embedding`, `PositionalEmbedding`, `LayerNorm` over the last axis, `CausalSelfAttention`,
//! and the `residual` note that adds a block's input to its last layer's output.

use super::{Net, Op, Spec};
use fusegraph::layers::{AttentionDims, EmbeddingDims, PositionalDims};
use serde_json::Value;

/// PyTorch's `LayerNorm` epsilon, the one fusegraph's `LayerNorm` uses.
const LAYER_NORM_EPS: f64 = 1e-5;

impl Net {
    /// An `Embedding` of the `[seq]` token ids: `{name}.embeddings` `[vocab, dim]`.
    pub(super) fn embedding(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&["vocab", "dim", "padding_idx"])?;
        self.embedding_table(layer, name, shape)
    }

    /// An `EmbeddingBag` (`mode` mean, no `padding_idx`) of the `[seq]` token ids: the
    /// `Embedding` of its table `{name}.embeddings`, which [`push_bag_mean`](Self::push_bag_mean)
    /// follows with the mean over each sample's real steps (a `MeanOverTime`, which honours
    /// the batch's lengths): `out[b] = Σ_{s < len} E[x[b, s]] / len`.
    pub(super) fn embedding_bag(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&["vocab", "dim", "padding_idx", "mode"])?;
        layer.expect_value("mode", &Value::from("mean"))?;
        if !layer.spec["padding_idx"].is_null() {
            return Err(format!(
                "{}: an EmbeddingBag's `padding_idx` (left out of the mean's count) is not supported",
                layer.what
            ));
        }
        self.embedding_table(layer, name, shape)
    }

    /// After the `Embedding` node of an `EmbeddingBag` `name`, the mean over the real steps
    /// of its `[seq, dim]` output, `[dim]` (the layer's `output_shape`).
    pub(super) fn push_bag_mean(&mut self, layer: &Spec<'_>, name: &str) -> Result<(), String> {
        let &[time, channels] = &self.output_shape[..] else {
            unreachable!("an EmbeddingBag's table gives [seq, dim]")
        };
        if let Some(v) = layer.spec.get("output_shape").filter(|v| !v.is_null()) {
            layer.expect_shape(v, &[channels], "output_shape")?;
        }
        let params = self.layout.len()..self.layout.len();
        let op = Op::MeanOverTime { time, channels };
        self.nodes.push(super::Node::new(op, channels, params));
        self.names.push(format!("{name}.mean"));
        self.output_shape = vec![channels];
        self.shapes.push(self.output_shape.clone());
        Ok(())
    }

    /// The table `{name}.embeddings` `[vocab, dim]` of an `Embedding` or `EmbeddingBag`.
    fn embedding_table(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        let &[seq] = shape else {
            return Err(format!(
                "{}: embeds [seq] token ids, not a {shape:?} input",
                layer.what
            ));
        };
        if !self.tokens || !self.nodes.is_empty() {
            return Err(format!(
                "{}: an Embedding reads the token ids of the model's input",
                layer.what
            ));
        }
        let (vocab, dim) = (layer.positive("vocab")?, layer.positive("dim")?);
        let padding = match &layer.spec["padding_idx"] {
            Value::Null => None,
            v => match v.as_u64().and_then(|p| usize::try_from(p).ok()) {
                Some(p) if p < vocab => Some(p),
                _ => return Err(format!("{}: `padding_idx` = {v} is not an id", layer.what)),
            },
        };
        self.layout
            .push(format!("{name}.embeddings"), vec![vocab, dim]);
        let dims = EmbeddingDims {
            vocab,
            dim,
            seq,
            padding,
        };
        Ok((Op::Embedding(dims), vec![seq, dim]))
    }

    /// A learned `PositionalEmbedding` added to `[seq, dim]`: `{name}.embeddings`
    /// `[max_len, dim]`, at least as long as the sequence.
    pub(super) fn positional(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&["max_len", "dim"])?;
        let &[seq, dim] = shape else {
            return Err(format!(
                "{}: adds to [seq, dim] sequences, not a {shape:?} input",
                layer.what
            ));
        };
        layer.expect_size("dim", dim)?;
        let max_len = layer.positive("max_len")?;
        if max_len < seq {
            return Err(format!(
                "{}: a table of {max_len} positions for sequences of {seq}",
                layer.what
            ));
        }
        self.layout
            .push(format!("{name}.embeddings"), vec![max_len, dim]);
        let dims = PositionalDims { max_len, dim, seq };
        Ok((Op::Positional(dims), shape.to_vec()))
    }

    /// A `LayerNorm` over the last axis (eps 1e-5, with `gamma` and `beta`):
    /// `{name}.gamma`, `{name}.beta`.
    pub(super) fn layer_norm(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&["features", "eps", "elementwise_affine"])?;
        let Some((&features, rows)) = shape.split_last() else {
            return Err(format!("{}: normalizes a shape with axes", layer.what));
        };
        layer.expect_size("features", features)?;
        layer.expect_value("elementwise_affine", &Value::Bool(true))?;
        if let Some(eps) = layer.spec["eps"].as_f64() {
            if eps != LAYER_NORM_EPS {
                return Err(format!(
                    "{}: eps {eps} (fusegraph's LayerNorm uses {LAYER_NORM_EPS})",
                    layer.what
                ));
            }
        }
        for part in ["gamma", "beta"] {
            self.layout.push(format!("{name}.{part}"), vec![features]);
        }
        let rows = rows.iter().product();
        Ok((Op::LayerNorm { features, rows }, shape.to_vec()))
    }

    /// A `CausalSelfAttention` over `[seq, dim]`: `{name}.{q,k,v,o}.kernel` `[dim, dim]`, each
    /// followed by its `.bias` when it has one.
    pub(super) fn attention(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&[
            "dim",
            "num_heads",
            "head_dim",
            "q_bias",
            "k_bias",
            "v_bias",
            "out_bias",
            "dropout",
            "mask",
            "scale",
            "key_padding_mask",
        ])?;
        let &[seq, dim] = shape else {
            return Err(format!(
                "{}: attends over [seq, dim] sequences, not a {shape:?} input",
                layer.what
            ));
        };
        layer.expect_size("dim", dim)?;
        let heads = layer.positive("num_heads")?;
        if !dim.is_multiple_of(heads) {
            return Err(format!("{}: {heads} heads do not divide {dim}", layer.what));
        }
        layer.expect_size("head_dim", dim / heads)?;
        if layer.spec["dropout"].as_f64().is_some_and(|d| d != 0.0) {
            return Err(format!("{}: dropout is not supported", layer.what));
        }
        if let Some(mask) = layer.spec["mask"].as_str() {
            if !mask.starts_with("causal") {
                return Err(format!("{}: unsupported mask `{mask}`", layer.what));
            }
        }
        let mut bias = [true; 4];
        for (b, key) in bias
            .iter_mut()
            .zip(["q_bias", "k_bias", "v_bias", "out_bias"])
        {
            *b = layer.flag(key, true)?;
        }
        for (part, &b) in ["q", "k", "v", "o"].iter().zip(&bias) {
            self.push_kernel(&format!("{name}.{part}"), vec![dim, dim], b);
        }
        let dims = AttentionDims {
            seq,
            dim,
            heads,
            bias,
        };
        Ok((Op::Attention(dims), shape.to_vec()))
    }

    /// The node whose input a `residual` note (`h = h + fc2(gelu(fc1(ln2(h))))`) adds to this
    /// layer's output: the earliest layer the note names (this layer itself when it names no
    /// other). `None` without a note.
    pub(super) fn residual(
        &self,
        layer: &Spec<'_>,
        input: &[usize],
        output: &[usize],
    ) -> Result<Option<usize>, String> {
        let Some(note) = layer.spec.get("residual").and_then(Value::as_str) else {
            return Ok(None);
        };
        let words: Vec<&str> = note
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        let this = self.nodes.len();
        let earlier = words
            .iter()
            .filter_map(|w| self.names.iter().position(|n| n == w));
        let named_self = layer.spec["name"]
            .as_str()
            .is_some_and(|n| words.contains(&n));
        let from = earlier
            .min()
            .or(named_self.then_some(this))
            .ok_or_else(|| format!("{}: the residual `{note}` names no layer", layer.what))?;
        let source = match from {
            0 => return Err(format!("{}: a residual from the model's input", layer.what)),
            k if k == this => input,
            k => &self.shapes[k - 1],
        };
        if source != output {
            return Err(format!(
                "{}: the residual adds {source:?} to {output:?}",
                layer.what
            ));
        }
        Ok(Some(from))
    }
}

impl Spec<'_> {
    /// Checks that a Dense layer's GELU is the exact (erf) one.
    pub(super) fn exact_gelu(&self) -> Result<(), String> {
        match self.spec.get("approximate").and_then(Value::as_str) {
            None => Ok(()),
            Some(a) if a.starts_with("none") => Ok(()),
            Some(a) => Err(format!(
                "{}: GELU approximation `{a}` (fusegraph's Gelu is the exact, erf form)",
                self.what
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Net;
    use super::*;
    use serde_json::json;

    /// A two-block language model with 4 heads and a positional table longer than the
    /// sequence, as the reference file describes one.
    fn lm(extra: Value) -> Result<Net, String> {
        let block = |i: usize| {
            let (ln1, attn, ln2, fc1, fc2) = (
                format!("ln1_{i}"),
                format!("attn_{i}"),
                format!("ln2_{i}"),
                format!("fc1_{i}"),
                format!("fc2_{i}"),
            );
            vec![
                json!({"name": ln1, "type": "LayerNorm", "features": 8, "eps": 1e-5}),
                json!({"name": attn, "type": "CausalSelfAttention", "dim": 8, "num_heads": 4,
                       "head_dim": 2, "k_bias": false, "mask": "causal (i attends to 0..i)",
                       "residual": format!("h = h + {attn}({ln1}(h))")}),
                json!({"name": ln2, "type": "LayerNorm", "features": 8}),
                json!({"name": fc1, "type": "Dense", "in": 8, "units": 16,
                       "activation": "gelu", "approximate": "none (erf)"}),
                json!({"name": fc2, "type": "Dense", "in": 16, "units": 8,
                       "residual": format!("h = h + {fc2}(gelu({fc1}({ln2}(h))))")}),
            ]
        };
        let mut layers = vec![
            json!({"name": "tok", "type": "Embedding", "vocab": 11, "dim": 8, "padding_idx": 0}),
            json!({"name": "pos", "type": "PositionalEmbedding", "max_len": 9, "dim": 8}),
        ];
        layers.extend(block(0));
        layers.extend(block(1));
        layers.push(json!({"name": "head", "type": "Dense", "in": 8, "units": 11}));
        for (k, v) in extra.as_object().into_iter().flatten() {
            let (i, key) = k.split_once('.').unwrap();
            layers[i.parse::<usize>().unwrap()][key] = v.clone();
        }
        Net::parse(
            &json!({"input_shape": [5], "input_dtype": "int (token ids)",
                           "layers": layers}),
        )
    }

    #[test]
    fn a_two_block_language_model_reads_with_its_residuals() {
        let net = lm(json!({})).unwrap();
        assert!(net.tokens);
        assert_eq!(net.output_shape, [5, 11]);
        let residuals: Vec<_> = net.nodes.iter().map(|n| n.residual).collect();
        let expect = [None, None, None, Some(2), None, None, Some(4)];
        assert_eq!(residuals[..7], expect);
        assert_eq!(residuals[8], Some(7));
        assert_eq!(residuals[11], Some(9));
        assert!(matches!(net.nodes[0].op, Op::Embedding(d) if d.padding == Some(0) && d.seq == 5));
        assert!(matches!(net.nodes[1].op, Op::Positional(d) if d.max_len == 9));
        assert!(
            matches!(net.nodes[3].op, Op::Attention(d) if d.heads == 4 && d.bias == [true, false, true, true])
        );
        assert!(matches!(
            net.nodes[2].op,
            Op::LayerNorm {
                features: 8,
                rows: 5
            }
        ));
        let names = &net.layout.names;
        assert_eq!(names[..2], ["tok.embeddings", "pos.embeddings"]);
        let attn: Vec<&str> = names[4..11].iter().map(String::as_str).collect();
        assert_eq!(
            attn,
            [
                "attn_0.q.kernel",
                "attn_0.q.bias",
                "attn_0.k.kernel",
                "attn_0.v.kernel",
                "attn_0.v.bias",
                "attn_0.o.kernel",
                "attn_0.o.bias"
            ]
        );
    }

    #[test]
    fn what_a_token_model_cannot_run_is_named() {
        let e = |extra: Value| lm(extra).unwrap_err();
        assert!(e(json!({"1.max_len": 4})).contains("table of 4 positions for sequences of 5"));
        assert!(e(json!({"0.padding_idx": 11})).contains("`padding_idx` = 11"));
        assert!(e(json!({"3.num_heads": 3})).contains("3 heads do not divide 8"));
        assert!(e(json!({"2.eps": 1e-3})).contains("eps 0.001"));
        assert!(e(json!({"5.approximate": "tanh"})).contains("`tanh`"));
        assert!(e(json!({"3.mask": "none"})).contains("unsupported mask"));
        assert!(e(json!({"3.residual": "h = h + other(h)"})).contains("names no layer"));
        assert!(
            e(json!({"5.residual": "h = h + fc1_0(ln2_0(h))"})).contains("adds [5, 8] to [5, 16]")
        );
        assert!(e(json!({"2.residual": "h = h + tok(h)"})).contains("from the model's input"));
    }
}
