//! [`Capability`]: the one instruction set of the process, detected once.

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// An instruction set the runtime's SIMD code runs on: one capability, chosen once per process,
/// for the matrix products and the element-wise passes alike.
///
/// `wide` picks its instructions when the crate is compiled, so a default build (`cargo build
/// --release` without `RUSTFLAGS`) runs SSE2 code on x86_64. The GEMM's microkernel and the
/// lane passes are also compiled for AVX2 with FMA and for AVX-512F, and
/// [`Capability::active`] picks the best one the CPU has, once, the first time SIMD code runs:
///
/// | capability | lanes | chosen when |
/// |---|---|---|
/// | [`Capability::Avx512`] | sixteen, one AVX-512 register | the CPU has AVX-512F (feature `std`), or the build enables it |
/// | [`Capability::Avx2Fma`] | eight, one AVX register | the CPU has AVX2 and FMA (feature `std`), or the build enables them |
/// | [`Capability::Portable`] | `wide`'s `f32x8` with the build's instructions; one `f32` on targets without SIMD | otherwise |
///
/// Without the `std` feature there is no detection: the choice is the best capability the
/// build's target features enable (`-C target-cpu` or `-C target-feature`).
///
/// # Bits
///
/// The element-wise passes give the same bits on every capability (see [`lane`](crate::lane)). The
/// matrix products round `mul_add` once on AVX2+FMA and AVX-512F, and as `wide` does on
/// `Portable` (once where the build enables FMA or NEON, twice otherwise; on a target without
/// SIMD, once with `--cfg fusegraph_core_fma`, twice without): a default build on an AVX2
/// machine gives the bits of a `-C target-cpu=native` build, and a `Portable` product without
/// FMA (SSE2) gives other bits (the module docs of `kernels::gemm` say which).
///
/// The environment variable `FUSEGRAPH_CPU_CAPABILITY` caps the choice, as PyTorch's
/// `ATEN_CPU_CAPABILITY` does: `portable`, `avx2` or `avx512` (the best capability available
/// at or below it). Set it to the same value on every machine of a cluster whose CPUs differ,
/// to get the same products everywhere; a value it does not know is refused with a panic naming
/// the values it knows, since a mistyped cap would silently change the bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `wide`'s `f32x8`, with the instructions the build's target features give it.
    Portable,
    /// 256-bit AVX2 with FMA (x86 only).
    Avx2Fma,
    /// 512-bit AVX-512F (x86 only).
    Avx512,
}

/// The environment variable that caps [`Capability::active`].
pub const CAPABILITY_VAR: &str = "FUSEGRAPH_CPU_CAPABILITY";

impl Capability {
    /// Every capability, from the most portable to the widest.
    pub const ALL: [Capability; 3] = [
        Capability::Portable,
        Capability::Avx2Fma,
        Capability::Avx512,
    ];

    /// The name `FUSEGRAPH_CPU_CAPABILITY` takes for this capability.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::Portable => "portable",
            Capability::Avx2Fma => "avx2",
            Capability::Avx512 => "avx512",
        }
    }

    /// The instructions the capability runs on this build, e.g. `portable f32x8 (SSE2)`.
    pub const fn describe(self) -> &'static str {
        match self {
            Capability::Portable => portable_description(),
            Capability::Avx2Fma => "AVX2+FMA",
            Capability::Avx512 => "AVX-512F",
        }
    }

    /// Whether the capability is compiled into this build and runs on this CPU: with the `std`
    /// feature the CPU is asked; without it, only what the build's target features enable
    /// counts.
    pub fn available(self) -> bool {
        match self {
            Capability::Portable => true,
            Capability::Avx2Fma => has_avx2_fma(),
            Capability::Avx512 => has_avx512(),
        }
    }

    /// The best capability the build's target features enable, whatever the CPU.
    pub const fn compiled() -> Capability {
        if cfg!(all(
            any(target_arch = "x86", target_arch = "x86_64"),
            target_feature = "avx512f"
        )) {
            Capability::Avx512
        } else if cfg!(all(
            any(target_arch = "x86", target_arch = "x86_64"),
            target_feature = "avx2",
            target_feature = "fma"
        )) {
            Capability::Avx2Fma
        } else {
            Capability::Portable
        }
    }

    /// The best capability that is [`available`](Self::available) and not above `cap`.
    pub fn best_up_to(cap: Capability) -> Capability {
        Capability::ALL
            .into_iter()
            .filter(|k| *k <= cap && k.available())
            .max()
            .unwrap_or(Capability::Portable)
    }

    /// The capability every SIMD pass of this process runs on: the best available one, capped by
    /// `FUSEGRAPH_CPU_CAPABILITY` (feature `std`); chosen on the first call and kept.
    ///
    /// # Panics
    /// If `FUSEGRAPH_CPU_CAPABILITY` holds a value other than `portable`, `avx2` or `avx512`.
    #[inline]
    pub fn active() -> Capability {
        match CHOSEN.load(Ordering::Relaxed) {
            0 => Capability::Portable,
            1 => Capability::Avx2Fma,
            2 => Capability::Avx512,
            _ => Capability::choose(),
        }
    }

    /// Chooses [`active`](Self::active)'s capability, on its first call: out of line, so that
    /// every later call, a load and a compare inlined into each pass, carries none of it.
    #[cold]
    #[inline(never)]
    fn choose() -> Capability {
        let chosen = Capability::best_up_to(cap());
        CHOSEN.store(chosen as u8, Ordering::Relaxed);
        chosen
    }

    /// The capability named `name` (as [`name`](Self::name) spells it, any case).
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.describe())
    }
}

/// [`Capability::active`]'s choice as `Capability as u8`, or `u8::MAX` before its first call.
static CHOSEN: AtomicU8 = AtomicU8::new(u8::MAX);

/// What `wide`'s `f32x8` compiles to in this build.
const fn portable_description() -> &'static str {
    if cfg!(all(target_feature = "avx", target_feature = "fma")) {
        "portable f32x8 (AVX+FMA)"
    } else if cfg!(target_feature = "avx") {
        "portable f32x8 (AVX)"
    } else if cfg!(all(target_feature = "sse2", target_feature = "fma")) {
        "portable f32x8 (SSE2+FMA)"
    } else if cfg!(target_feature = "sse2") {
        "portable f32x8 (SSE2)"
    } else if cfg!(all(target_arch = "aarch64", target_feature = "neon")) {
        "portable f32x8 (NEON)"
    } else {
        "portable f32x8 (scalar)"
    }
}

/// The cap from `FUSEGRAPH_CPU_CAPABILITY` (feature `std`), else the widest capability.
fn cap() -> Capability {
    #[cfg(feature = "std")]
    if let Some(value) = std::env::var_os(CAPABILITY_VAR) {
        let value = value.to_string_lossy();
        return Capability::from_name(&value).unwrap_or_else(|| {
            panic!("{CAPABILITY_VAR}={value:?}: write portable, avx2 or avx512")
        });
    }
    Capability::Avx512
}

/// AVX2 and FMA on this CPU (feature `std`) or in this build.
fn has_avx2_fma() -> bool {
    #[cfg(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64")))]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64"))))]
    {
        Capability::compiled() >= Capability::Avx2Fma
    }
}

/// AVX-512F on this CPU (feature `std`) or in this build.
fn has_avx512() -> bool {
    #[cfg(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64")))]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64"))))]
    {
        Capability::compiled() >= Capability::Avx512
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_caps_hold() {
        for k in Capability::ALL {
            assert_eq!(Capability::from_name(k.name()), Some(k));
            assert_eq!(Capability::from_name(&k.name().to_uppercase()), Some(k));
            assert!(Capability::best_up_to(k) <= k);
            assert!(Capability::best_up_to(k).available());
        }
        assert_eq!(Capability::from_name("sse9"), None);
        assert_eq!(
            Capability::best_up_to(Capability::Portable),
            Capability::Portable
        );
        assert!(Capability::compiled().available());
        assert_eq!(Capability::active(), Capability::best_up_to(cap()));
    }
}
