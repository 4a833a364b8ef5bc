//! Data sets, loaders (CSV, IDX), scaling and seeded splits.
