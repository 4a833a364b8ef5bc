//! Constructor arguments of a case: those the generator passed (`args`) over the class defaults
//! (`defaults`), read as numbers, flags and counts, and checked against what the harness maps.

use serde_json::{Map, Value};

/// Arguments of one constructor call (an optimizer, a schedule, a scheduler).
pub(crate) struct Args<'a> {
    passed: Option<&'a Map<String, Value>>,
    defaults: Option<&'a Map<String, Value>>,
}

/// Which variant of a rule an optimizer's arguments pick.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Variant {
    /// A non-zero `momentum` (SGD, RMSprop).
    pub momentum: bool,
    /// `nesterov` (SGD).
    pub nesterov: bool,
    /// `centered` (RMSprop).
    pub centered: bool,
    /// `amsgrad` (Adam, AdamW).
    pub amsgrad: bool,
}

impl<'a> Args<'a> {
    /// Arguments `passed` (an object or `null`), falling back to `defaults` (an object, `null`
    /// or absent) for the ones not passed.
    pub fn new(passed: Option<&'a Value>, defaults: Option<&'a Value>) -> Result<Self, String> {
        let object = |v: Option<&'a Value>, what: &str| match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(other) => Err(format!("`{what}` is not an object: {other}")),
        };
        Ok(Args {
            passed: object(passed, "args")?,
            defaults: object(defaults, "defaults")?,
        })
    }

    /// The value of `name`: passed, else its default; `None` when absent or `null`.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        let passed = self.passed.and_then(|m| m.get(name));
        let value = match passed {
            Some(v) => Some(v),
            None => self.defaults.and_then(|m| m.get(name)),
        };
        value.filter(|v| !v.is_null())
    }

    /// A numeric argument; a flag is 1 or 0 (the hyper-parameters of a rule that switch an
    /// option, such as Muon's `nesterov`).
    pub fn number(&self, name: &str) -> Result<Option<f64>, String> {
        self.get(name)
            .map(|v| {
                v.as_f64()
                    .or_else(|| v.as_bool().map(|b| f64::from(u8::from(b))))
                    .ok_or_else(|| format!("argument `{name}` = {v} is not a number"))
            })
            .transpose()
    }

    /// A numeric argument as the `f32` hyper-parameter the frameworks compute with.
    pub fn float(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self.number(name)?.map(|x| x as f32))
    }

    /// Element `index` of a numeric list argument (PyTorch `betas`).
    pub fn element(&self, name: &str, index: usize) -> Result<Option<f32>, String> {
        self.get(name)
            .map(|v| {
                v.get(index)
                    .and_then(Value::as_f64)
                    .map(|x| x as f32)
                    .ok_or_else(|| format!("argument `{name}` = {v} has no number at {index}"))
            })
            .transpose()
    }

    /// A boolean argument; absent or `null` is `false`.
    pub fn flag(&self, name: &str) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(format!("argument `{name}` = {v} is not a boolean")),
        }
    }

    /// The arguments that pick a variant of a rule, in both frameworks.
    pub fn variant(&self) -> Result<Variant, String> {
        Ok(Variant {
            momentum: self.number("momentum")?.unwrap_or(0.0) != 0.0,
            nesterov: self.flag("nesterov")?,
            centered: self.flag("centered")?,
            amsgrad: self.flag("amsgrad")?,
        })
    }

    /// A non-negative whole-number argument (step counts); `1.0` is accepted as `1`.
    pub fn count(&self, name: &str) -> Result<Option<u64>, String> {
        match self.number(name)? {
            None => Ok(None),
            Some(x) if x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(53) => Ok(Some(x as u64)),
            Some(x) => Err(format!("argument `{name}` = {x} is not a step count")),
        }
    }

    /// Fails, naming the argument, when an argument was passed that is not in `supported` and
    /// is not harmless: `null`, `false`, or equal to its default.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), String> {
        let Some(passed) = self.passed else {
            return Ok(());
        };
        for (name, value) in passed {
            if supported.contains(&name.as_str()) {
                continue;
            }
            let is_default = self.defaults.and_then(|d| d.get(name)) == Some(value);
            if !(value.is_null() || *value == Value::Bool(false) || is_default) {
                return Err(format!("unsupported argument `{name}` = {value}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn passed_over_default_and_null_is_absent() {
        let passed = json!({"lr": 0.5, "beta": null});
        let defaults = json!({"lr": 0.1, "eps": 1e-7, "beta": 0.3});
        let a = Args::new(Some(&passed), Some(&defaults)).unwrap();
        assert_eq!(a.number("lr").unwrap(), Some(0.5));
        assert_eq!(a.number("eps").unwrap(), Some(1e-7));
        assert_eq!(a.number("beta").unwrap(), None);
        assert_eq!(a.number("missing").unwrap(), None);
        assert!(!a.flag("missing").unwrap());
    }

    #[test]
    fn betas_and_counts() {
        let passed = json!({"betas": [0.8, 0.99], "steps": 4.0, "bad": 1.5});
        let a = Args::new(Some(&passed), None).unwrap();
        assert_eq!(a.element("betas", 1).unwrap(), Some(0.99));
        assert_eq!(a.count("steps").unwrap(), Some(4));
        assert!(a.count("bad").is_err());
    }

    #[test]
    fn unsupported_unless_harmless() {
        let defaults = json!({"capturable": false, "foo": 3});
        let ok = json!({"lr": 1.0, "capturable": false, "foo": 3, "bar": null});
        let a = Args::new(Some(&ok), Some(&defaults)).unwrap();
        assert!(a.check_supported(&["lr"]).is_ok());
        let bad = json!({"lr": 1.0, "capturable": true});
        let a = Args::new(Some(&bad), Some(&defaults)).unwrap();
        let e = a.check_supported(&["lr"]).unwrap_err();
        assert!(e.contains("`capturable`"), "{e}");
    }
}
