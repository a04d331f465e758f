include!(concat!(env!("OUT_DIR"), "/codegen.rs"));
