//! To and from bytes: a model (and a train step) as a safetensors file in memory, and back,
//! checking the whole file before changing anything.

use super::checksum::{self, crc32, KEY_METADATA, TENSOR};
use super::layout::{
    check_unique, for_each_permuted, model_entries, train_entries, Entry, Source, OPTIMIZER, STEP,
    TRAIN,
};
use super::metadata::{Metadata, Version, MODEL, TRAINING};
use super::{CheckpointError, Loader, Warning};
use crate::optim::{OptimizerPart, Part, PartMut, Rule, Storage, UpdateMode};
use crate::train::{Model, NamedTensor, StatePart, Step};
use safetensors::tensor::Metadata as Header;
use safetensors::{Dtype, SafeTensorError, SafeTensors, View};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

/// Bytes of the header-length prefix of a safetensors file.
const PREFIX: usize = 8;

/// One tensor to write, owning its little-endian bytes.
struct Owned {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for Owned {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The values of tensor `t` of a flat buffer, in PyTorch's layout, as little-endian bytes.
fn f32_bytes(t: &NamedTensor, values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * 4];
    for_each_permuted(t.tensor.shape, t.torch.axes, |i, j| {
        out[4 * i..4 * i + 4].copy_from_slice(&values[j].to_le_bytes());
    });
    out
}

/// Reads the little-endian bytes of tensor `t`, in PyTorch's layout, into `dst`.
fn read_f32(t: &NamedTensor, data: &[u8], dst: &mut [f32]) {
    for_each_permuted(t.tensor.shape, t.torch.axes, |i, j| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&data[4 * i..4 * i + 4]);
        dst[j] = f32::from_le_bytes(b);
    });
}

fn read_i64(data: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&data[..8]);
    i64::from_le_bytes(b)
}

/// The bytes of entry `e`, whose part holds `values` (`counter` for BatchNorm counters).
fn entry_bytes(e: &Entry, values: Option<Part<'_>>, counter: i64) -> Vec<u8> {
    match (e.source, values) {
        (Source::Tensor { tensor, at, .. }, Some(Part::Floats(v))) => {
            f32_bytes(tensor, &v[at..][..tensor.tensor.len()])
        }
        (Source::Values { at, len, .. }, Some(Part::Floats(v))) => v[at..at + len]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        (_, Some(Part::Floats(v))) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        // Below 2^63 for the step counter (checked by `to_bytes_with`); the seed's 64 bits.
        (_, Some(Part::Word(w))) => (w as i64).to_le_bytes().to_vec(),
        (_, None) => counter.to_le_bytes().to_vec(),
    }
}

/// The part of the state entry `e` is a tensor of, if it is one of a part.
fn part_of(e: &Entry) -> Option<StatePart> {
    match e.source {
        Source::Tensor { part, .. } | Source::Values { part, .. } | Source::Scalar(part) => {
            Some(part)
        }
        Source::Counter => None,
    }
}

/// The tensors of `entries`, each named and with the bytes of the values `values` gives its
/// part.
fn tensors<'a>(
    entries: &[Entry],
    values: impl Fn(StatePart) -> Part<'a>,
    counter: i64,
) -> Vec<(String, Owned)> {
    entries
        .iter()
        .map(|e| {
            let data = entry_bytes(e, part_of(e).map(&values), counter);
            let t = Owned {
                dtype: e.dtype,
                shape: e.shape.clone(),
                data,
            };
            (e.name.clone(), t)
        })
        .collect()
}

/// `s` as a JSON string literal.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Adds to `meta` the checksum of every tensor, then the checksum of the metadata.
fn seal(tensors: &[(String, Owned)], meta: &mut Metadata) {
    for (name, t) in tensors {
        meta.insert(format!("{TENSOR}{name}"), crc32(&t.data));
    }
    meta.insert(KEY_METADATA, checksum::of_metadata(meta));
}

/// A safetensors file of `tensors` and `meta`, sealed with their checksums. The crate writes
/// the tensors; the metadata, which it would write in the random order of a `HashMap`, goes
/// first in the header with its keys sorted, so that the same state always gives the same
/// bytes.
fn encode(tensors: Vec<(String, Owned)>, mut meta: Metadata) -> Result<Vec<u8>, CheckpointError> {
    seal(&tensors, &mut meta);
    let corrupt = |e: SafeTensorError| CheckpointError::Header {
        reason: e.to_string(),
    };
    let plain = safetensors::serialize(tensors, None).map_err(corrupt)?;
    let (n, _) = SafeTensors::read_metadata(&plain).map_err(corrupt)?;
    let rest = std::str::from_utf8(&plain[PREFIX..PREFIX + n])
        .map_err(|e| corrupt(SafeTensorError::InvalidHeader(e)))?
        .trim_end()
        .strip_prefix('{')
        .unwrap_or("}");
    let mut header = String::from("{\"__metadata__\":{");
    for (i, (k, v)) in meta.iter().enumerate() {
        if i > 0 {
            header.push(',');
        }
        json_string(k, &mut header);
        header.push(':');
        json_string(v, &mut header);
    }
    header.push('}');
    if rest != "}" {
        header.push(',');
    }
    header.push_str(rest);
    while header.len() % PREFIX != 0 {
        header.push(' ');
    }
    let mut out = Vec::with_capacity(PREFIX + header.len() + plain.len() - PREFIX - n);
    out.extend((header.len() as u64).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(&plain[PREFIX + n..]);
    SafeTensors::read_metadata(&out).map_err(corrupt)?;
    Ok(out)
}

/// The model's parameters and state as a safetensors file (what
/// [`save_model`](super::save_model) writes).
pub fn model_to_bytes<M: Model>(model: &M) -> Result<Vec<u8>, CheckpointError> {
    let entries = model_entries::<M>();
    check_unique(&entries)?;
    let model_part = |part: StatePart| part.of_model(model).unwrap_or(Part::Floats(&[]));
    let tensors = tensors(&entries, model_part, 0);
    encode(tensors, Metadata::for_model::<M>(MODEL, &[]))
}

/// The model and the train step as a safetensors file (what [`save`](super::save) writes).
pub fn to_bytes<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    model: &M,
    step: &Step<M, R, B, U, S>,
) -> Result<Vec<u8>, CheckpointError> {
    to_bytes_with(model, step, &[])
}

/// [`to_bytes`] with the caller's metadata entries, stored under `user.` and read back by
/// [`Metadata::get`] with their own keys.
pub fn to_bytes_with<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    model: &M,
    step: &Step<M, R, B, U, S>,
    extra: &[(&str, &str)],
) -> Result<Vec<u8>, CheckpointError> {
    let opt = step.optimizer();
    let entries = train_entries::<M, R, U, S>(step.state_parts(), opt);
    check_unique(&entries)?;
    let counter = i64::try_from(opt.iterations()).map_err(|_| CheckpointError::Value {
        name: STEP.into(),
        value: opt.iterations().to_string(),
        expected: "a step count below 2^63 (stored as I64)",
    })?;
    let tensors = tensors(&entries, |part| step.part(model, part), counter);
    let mut meta = Metadata::for_model::<M>(TRAINING, extra);
    meta.add_optimizer(opt);
    encode(tensors, meta)
}

/// A safetensors error as a checkpoint error: a file that ends too early is truncated, any
/// other fault is in the header.
fn header_error(e: SafeTensorError, len: usize) -> CheckpointError {
    match e {
        SafeTensorError::HeaderTooSmall
        | SafeTensorError::InvalidHeaderLength
        | SafeTensorError::MetadataIncompleteBuffer => CheckpointError::Truncated { len },
        e => CheckpointError::Header {
            reason: e.to_string(),
        },
    }
}

/// The header of a safetensors file as text, and the length of the data section after it, when
/// the length prefix fits the file and the header is UTF-8 (otherwise `safetensors` says why
/// not).
fn split_header(bytes: &[u8]) -> Option<(&str, usize)> {
    let prefix: [u8; PREFIX] = bytes.get(..PREFIX)?.try_into().ok()?;
    let n = usize::try_from(u64::from_le_bytes(prefix)).ok()?;
    let json = bytes.get(PREFIX..PREFIX.checked_add(n)?)?;
    Some((std::str::from_utf8(json).ok()?, bytes.len() - PREFIX - n))
}

/// What a file that is not safetensors is, when it starts as a file of `torch.save` does: a
/// zip archive (PyTorch 1.6 and later) or a pickle (before), whose bytes at the place of a
/// safetensors header do not open a JSON object.
fn torch_save_kind(bytes: &[u8]) -> Option<&'static str> {
    if bytes.get(PREFIX) == Some(&b'{') {
        return None;
    }
    match bytes {
        [b'P', b'K', 3, 4, ..] => Some("a zip archive, as `torch.save` writes"),
        [0x80, 2..=5, ..] => Some("a pickle, as `torch.save` writes"),
        _ => None,
    }
}

/// One tensor of a file, as its header describes it.
pub(super) struct Stored<'a> {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes, as many as its type and shape need.
    pub data: &'a [u8],
}

/// A parsed file: its header, metadata and data section.
pub(super) struct File<'a> {
    header: Header,
    meta: Metadata,
    data: &'a [u8],
}

impl<'a> File<'a> {
    pub(super) fn parse(bytes: &'a [u8]) -> Result<Self, CheckpointError> {
        if let Some(found) = torch_save_kind(bytes) {
            return Err(CheckpointError::NotSafetensors { found });
        }
        if let Some((json, data_len)) = split_header(bytes) {
            super::header::check(json, data_len, bytes.len())?;
        }
        let (n, header) =
            SafeTensors::read_metadata(bytes).map_err(|e| header_error(e, bytes.len()))?;
        let meta = header
            .metadata()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let data = bytes
            .get(PREFIX + n..)
            .ok_or(CheckpointError::Truncated { len: bytes.len() })?;
        Ok(File { header, meta, data })
    }

    /// Every tensor of the file, in the order of their names.
    pub(super) fn stored(&self) -> Result<Vec<Stored<'a>>, CheckpointError> {
        let mut out = self
            .header
            .tensors()
            .into_iter()
            .map(|(name, info)| {
                let (start, end) = info.data_offsets;
                match self.data.get(start..end) {
                    Some(data) => Ok(Stored {
                        dtype: info.dtype,
                        shape: info.shape.clone(),
                        data,
                        name,
                    }),
                    None => Err(CheckpointError::Header {
                        reason: format!("the data of `{name}` lies outside the file"),
                    }),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The data of every entry, after checking that each is present with its type and shape,
    /// and that the file holds nothing else (but tensors whose names start with one of
    /// `ignored`).
    fn check<'e>(
        &self,
        entries: &'e [Entry],
        ignored: &[&str],
    ) -> Result<Vec<(&'e Entry, &'a [u8])>, CheckpointError> {
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let info = self
                .header
                .info(&e.name)
                .ok_or_else(|| CheckpointError::MissingTensor {
                    name: e.name.clone(),
                    shape: e.shape.clone(),
                })?;
            if info.dtype != e.dtype {
                return Err(CheckpointError::Dtype {
                    name: e.name.clone(),
                    expected: e.dtype.to_string(),
                    found: info.dtype.to_string(),
                });
            }
            if info.shape != e.shape {
                return Err(CheckpointError::Shape {
                    name: e.name.clone(),
                    expected: e.shape.clone(),
                    found: info.shape.clone(),
                });
            }
            let (start, end) = info.data_offsets;
            let width = if e.dtype == Dtype::I64 { 8 } else { 4 };
            let len = e.shape.iter().product::<usize>() * width;
            let data = self
                .data
                .get(start..end)
                .filter(|d| d.len() == len)
                .ok_or_else(|| CheckpointError::Header {
                    reason: format!("the data of `{}` does not fit its shape", e.name),
                })?;
            out.push((e, data));
        }
        let known: BTreeSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let mut unexpected: Vec<String> = self
            .header
            .tensors()
            .into_keys()
            .filter(|k| !known.contains(k.as_str()) && !ignored.iter().any(|p| k.starts_with(p)))
            .collect();
        unexpected.sort();
        match unexpected.into_iter().next() {
            Some(name) => Err(CheckpointError::UnexpectedTensor { name }),
            None => Ok(out),
        }
    }

    /// Checks the bytes of every `checked` tensor against its checksum (in a file of the
    /// current version), and that its floating-point values are finite (noting the first that
    /// is not in the warnings instead when `loader` accepts them).
    fn verify(
        &mut self,
        checked: &[(&Entry, &[u8])],
        version: Version,
        loader: &Loader,
    ) -> Result<(), CheckpointError> {
        for (e, data) in checked {
            if version == Version::Current {
                let key = format!("{TENSOR}{}", e.name);
                checksum::verify(&self.meta, &key, crc32(data), |stored, computed| {
                    CheckpointError::Checksum {
                        name: e.name.clone(),
                        stored,
                        computed,
                    }
                })?;
            }
            let Some((index, value)) = first_non_finite(e, data) else {
                continue;
            };
            if !loader.accepts_non_finite() {
                return Err(CheckpointError::NonFinite {
                    name: e.name.clone(),
                    index,
                    value,
                });
            }
            self.meta.warn(Warning::NonFinite {
                name: e.name.clone(),
                index,
            });
        }
        Ok(())
    }
}

/// The index and value of the first NaN or infinity of an `F32` entry's bytes.
fn first_non_finite(e: &Entry, data: &[u8]) -> Option<(usize, f32)> {
    if e.dtype != Dtype::F32 {
        return None;
    }
    data.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .enumerate()
        .find(|(_, v)| !v.is_finite())
}

/// Copies the checked bytes `data` of entry `e` into `values`, the values of its part.
fn read_entry(e: &Entry, data: &[u8], values: PartMut<'_>) {
    match (e.source, values) {
        (Source::Tensor { tensor, at, .. }, PartMut::Floats(v)) => {
            read_f32(tensor, data, &mut v[at..][..tensor.tensor.len()]);
        }
        (Source::Values { at, len, .. }, PartMut::Floats(v)) => {
            for (x, b) in v[at..at + len].iter_mut().zip(data.chunks_exact(4)) {
                *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        (_, PartMut::Floats(v)) => {
            for (x, b) in v.iter_mut().zip(data.chunks_exact(4)) {
                *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        (_, PartMut::Word(w)) => *w = read_i64(data) as u64,
    }
}

/// Checks the step counter of the checked entries: a count, at least 0.
fn check_step_count(checked: &[(&Entry, &[u8])]) -> Result<(), CheckpointError> {
    let iterations = Source::Scalar(StatePart::Optimizer(OptimizerPart::Iterations));
    for (e, data) in checked.iter().filter(|(e, _)| e.source == iterations) {
        let v = read_i64(data);
        if v < 0 {
            return Err(CheckpointError::Value {
                name: e.name.clone(),
                value: v.to_string(),
                expected: "a step count, at least 0",
            });
        }
    }
    Ok(())
}

/// Loads a model's parameters and state from a file of [`model_to_bytes`] or
/// [`to_bytes`] (whose optimizer state is then ignored), refusing non-finite values (see
/// [`Loader`]). Nothing changes unless the whole file fits the model.
pub fn model_from_bytes<M: Model>(
    bytes: &[u8],
    model: &mut M,
) -> Result<Metadata, CheckpointError> {
    Loader::new().model_from_bytes(bytes, model)
}

/// Loads a model and a train step from a file of [`to_bytes`]: parameters, state, optimizer
/// slots, carried scalars, EMA, step counter, dropout seed and hyper-parameters, refusing
/// non-finite values (see [`Loader`]). Nothing changes unless the whole file fits the model
/// and the optimizer.
pub fn from_bytes<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    bytes: &[u8],
    model: &mut M,
    step: &mut Step<M, R, B, U, S>,
) -> Result<Metadata, CheckpointError> {
    Loader::new().from_bytes(bytes, model, step)
}

/// [`model_from_bytes`] with the choices of `loader`.
pub(crate) fn read_model<M: Model>(
    bytes: &[u8],
    model: &mut M,
    loader: &Loader,
) -> Result<Metadata, CheckpointError> {
    let mut file = File::parse(bytes)?;
    let version = file.meta.check_model::<M>(MODEL)?;
    let entries = model_entries::<M>();
    check_unique(&entries)?;
    let checked = file.check(&entries, &[OPTIMIZER, TRAIN])?;
    file.verify(&checked, version, loader)?;
    for (e, data) in checked {
        if let Some(values) = part_of(e).and_then(|part| part.of_model_mut(model)) {
            read_entry(e, data, values);
        }
    }
    Ok(file.meta)
}

/// [`from_bytes`] with the choices of `loader`.
pub(crate) fn read_training<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    bytes: &[u8],
    model: &mut M,
    step: &mut Step<M, R, B, U, S>,
    loader: &Loader,
) -> Result<Metadata, CheckpointError> {
    let mut file = File::parse(bytes)?;
    let version = file.meta.check_model::<M>(TRAINING)?;
    let hyper = file.meta.check_optimizer::<R>()?;
    let entries = train_entries::<M, R, U, S>(step.state_parts(), step.optimizer());
    check_unique(&entries)?;
    let checked = file.check(&entries, &[])?;
    file.verify(&checked, version, loader)?;
    check_step_count(&checked)?;
    for (e, data) in checked {
        if let Some(part) = part_of(e) {
            read_entry(e, data, step.part_mut(model, part));
        }
    }
    let rule = step.optimizer_mut().rule_mut();
    for (name, v) in R::HYPER.iter().zip(hyper) {
        rule.set_hyper(name, v);
    }
    Ok(file.meta)
}
