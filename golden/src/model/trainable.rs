//! The tensors of a model case that train: those of `model.weight_order` not in
//! `model.frozen_weights` (PyTorch's `requires_grad=False`), as `model.trainable_weights` lists
//! them; every tensor in a case that has neither. A frozen tensor has no gradient and no
//! optimizer state: the gradients, the optimizer's slots and what a case records of them are
//! laid out as the trainable tensors, one after the other.

use crate::tensor::Layout;
use serde_json::Value;

/// The trainable tensors of a case, among its parameters.
#[derive(Debug)]
pub(crate) struct Trainable {
    /// Their layout in the buffers of the trainable tensors (gradients, optimizer slots).
    pub layout: Layout,
    /// The index of each in the parameter layout, in order.
    pub of: Vec<usize>,
}

impl Trainable {
    /// Reads `model.frozen_weights` and `model.trainable_weights` (either may be absent:
    /// without both, every tensor trains) against the parameters `all`; a name that is not a
    /// tensor of `all`, or two lists that do not split it, are an error naming them.
    pub fn parse(model: &Value, all: &Layout) -> Result<Trainable, String> {
        let frozen = names(model, "frozen_weights", all)?;
        let trainable = names(model, "trainable_weights", all)?;
        let frozen = match (frozen, &trainable) {
            (Some(frozen), _) => frozen,
            (None, Some(trainable)) => (0..all.names.len())
                .filter(|i| !trainable.contains(i))
                .collect(),
            (None, None) => Vec::new(),
        };
        let of: Vec<usize> = (0..all.names.len())
            .filter(|i| !frozen.contains(i))
            .collect();
        if let Some(listed) = trainable.filter(|listed| *listed != of) {
            return Err(format!(
                "model.trainable_weights is {:?}; the tensors of model.weight_order not in \
                 model.frozen_weights are {:?}",
                listed.iter().map(|&i| &all.names[i]).collect::<Vec<_>>(),
                of.iter().map(|&i| &all.names[i]).collect::<Vec<_>>()
            ));
        }
        if of.is_empty() {
            return Err("model.frozen_weights freezes every tensor: nothing trains".into());
        }
        let mut layout = Layout::default();
        for &i in &of {
            layout.push(all.names[i].clone(), all.shapes[i].clone());
        }
        Ok(Trainable { layout, of })
    }

    /// Whether tensor `i` of the parameters trains.
    pub fn trains(&self, i: usize) -> bool {
        self.of.contains(&i)
    }

    /// Copies the trainable tensors of `from` (laid out as the parameters `all`) into `into`
    /// (laid out as the trainable tensors).
    pub fn gather(&self, all: &Layout, from: &[f32], into: &mut [f32]) {
        for (&i, to) in self.of.iter().zip(&self.layout.ranges) {
            into[to.clone()].copy_from_slice(&from[all.ranges[i].clone()]);
        }
    }

    /// Copies `from` (laid out as the trainable tensors) into the trainable tensors of `into`
    /// (laid out as the parameters `all`).
    pub fn scatter(&self, all: &Layout, from: &[f32], into: &mut [f32]) {
        for (&i, at) in self.of.iter().zip(&self.layout.ranges) {
            into[all.ranges[i].clone()].copy_from_slice(&from[at.clone()]);
        }
    }
}

/// The indices in `all` of the tensors listed by `model[key]`, when present: names of
/// tensors of `all`, each once.
fn names(model: &Value, key: &str, all: &Layout) -> Result<Option<Vec<usize>>, String> {
    let Some(list) = model.get(key).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let list = list
        .as_array()
        .ok_or_else(|| format!("model.{key} is not a list of names"))?;
    let mut indices = Vec::with_capacity(list.len());
    for v in list {
        let name = v
            .as_str()
            .ok_or_else(|| format!("model.{key} holds {v}, not a name"))?;
        let i = all
            .names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| format!("model.{key} names `{name}`, not in model.weight_order"))?;
        if indices.contains(&i) {
            return Err(format!("model.{key} names `{name}` twice"));
        }
        indices.push(i);
    }
    Ok(Some(indices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all() -> Layout {
        let mut l = Layout::default();
        l.push("a.kernel".into(), vec![2, 3]);
        l.push("a.bias".into(), vec![3]);
        l.push("b.kernel".into(), vec![3, 1]);
        l.push("b.bias".into(), vec![1]);
        l
    }

    #[test]
    fn frozen_tensors_leave_the_layout_of_the_trainable_ones() {
        let all = all();
        let model = json!({"frozen_weights": ["a.kernel", "b.kernel"],
                           "trainable_weights": ["a.bias", "b.bias"]});
        let t = Trainable::parse(&model, &all).unwrap();
        assert_eq!(t.of, [1, 3]);
        assert_eq!(t.layout.names, ["a.bias", "b.bias"]);
        assert_eq!(t.layout.ranges, [0..3, 3..4]);
        assert!(t.trains(1) && !t.trains(0));
        let params: Vec<f32> = (0..13).map(|i| i as f32).collect();
        let mut grads = vec![0.0; 4];
        t.gather(&all, &params, &mut grads);
        assert_eq!(grads, [6.0, 7.0, 8.0, 12.0]);
        let mut back = vec![-1.0; 13];
        t.scatter(&all, &grads, &mut back);
        let kept: Vec<f32> = back.iter().copied().filter(|&v| v >= 0.0).collect();
        assert_eq!(kept, grads);
        assert_eq!(back[..6], [-1.0; 6]);
        // Either list alone says the same; neither trains everything.
        let only_frozen = json!({"frozen_weights": ["a.kernel", "b.kernel"]});
        assert_eq!(Trainable::parse(&only_frozen, &all).unwrap().of, [1, 3]);
        let only_trainable = json!({"trainable_weights": ["a.bias", "b.bias"]});
        assert_eq!(Trainable::parse(&only_trainable, &all).unwrap().of, [1, 3]);
        assert_eq!(Trainable::parse(&json!({}), &all).unwrap().of, [0, 1, 2, 3]);
    }

    #[test]
    fn lists_that_do_not_split_the_weights_are_refused() {
        let all = all();
        let parse = |m: Value| Trainable::parse(&m, &all).unwrap_err();
        let e = parse(json!({"frozen_weights": ["c.kernel"]}));
        assert!(e.contains("`c.kernel`"), "{e}");
        let e = parse(json!({"frozen_weights": ["a.bias", "a.bias"]}));
        assert!(e.contains("twice"), "{e}");
        let e = parse(json!({"frozen_weights": ["a.kernel"], "trainable_weights": ["a.bias"]}));
        assert!(e.contains("trainable_weights"), "{e}");
        let e = parse(json!({"trainable_weights": []}));
        assert!(e.contains("nothing trains"), "{e}");
    }
}
