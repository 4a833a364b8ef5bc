//! Checkpoints in the safetensors format, written atomically.
