//! tgc runtime
