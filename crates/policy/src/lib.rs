//! Whether an attempt is finished: a pure decision over evidence, depending on nothing else of drover's.

pub mod policy;
