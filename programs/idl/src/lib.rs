//! The one generator of the programs' Anchor IDLs (`idl/<program>.json`,
//! Anchor 0.30+ format), shared by the programs' host tests. Each program's
//! `src/idl.rs` (a `#[cfg(test)]` module) describes its instructions, accounts,
//! events, errors and types with these helpers, renders the IDL with
//! [`Idl::render`] and compares it with the committed file with
//! [`check_committed`]; `UPDATE_IDL=1 cargo test -p <program>` rewrites it.
//! The Go bindings (clients/bindings) are generated from those files, so the
//! program, its IDL and the bindings stay in lockstep.
//!
//! Zero-copy (`#[repr(C)]`) structs are described field by field with
//! [`zero_copy!`], which checks every descriptor against `offset_of!` and
//! `size_of`: a descriptor that disagrees with the struct fails the test.
//!
//! Host only: a dev-dependency of the program crates (it uses std and
//! serde_json), never built for the bpf target.

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use serde_json::{json, Value};

/// The System program's address, for fixed `system_program` accounts.
pub const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";

/// A type declared in the IDL's `types`.
pub fn defined(name: &str) -> Value {
    json!({ "defined": { "name": name } })
}

/// A fixed-size array of `n` elements of type `t`.
pub fn array(t: Value, n: usize) -> Value {
    json!({ "array": [t, n] })
}

/// `Option<t>` (Borsh: a 0/1 tag, then the value).
pub fn option(t: Value) -> Value {
    json!({ "option": t })
}

/// `Vec<t>` (Borsh: a u32 length, then the elements).
pub fn vec(t: Value) -> Value {
    json!({ "vec": t })
}

/// A fixed-size byte array.
pub fn bytes(n: usize) -> Value {
    array(json!("u8"), n)
}

/// An instruction account (name and flags; no fixed address).
pub fn account(name: &str, writable: bool, signer: bool) -> Value {
    let mut a = json!({ "name": name });
    if writable {
        a["writable"] = json!(true);
    }
    if signer {
        a["signer"] = json!(true);
    }
    a
}

/// An instruction account at a fixed address (a program).
pub fn fixed_account(name: &str, address: &str) -> Value {
    json!({ "name": name, "address": address })
}

/// Adds PDA seeds to an instruction account.
pub fn with_pda(mut account: Value, seeds: &[Value]) -> Value {
    account["pda"] = json!({ "seeds": seeds });
    account
}

/// A constant PDA seed.
pub fn seed_const(value: &[u8]) -> Value {
    json!({ "kind": "const", "value": value })
}

/// A PDA seed taken from an instruction argument (`params.<field>`).
pub fn seed_arg(path: &str) -> Value {
    json!({ "kind": "arg", "path": path })
}

/// A PDA seed taken from another account of the instruction.
pub fn seed_account(path: &str) -> Value {
    json!({ "kind": "account", "path": path })
}

/// Base58 form of an address.
pub fn address(key: &[u8; 32]) -> String {
    let mut buf = [0u8; psyche_sdk::base58::MAX_ENCODED_32];
    psyche_sdk::base58::encode_32(key, &mut buf).into()
}

/// The IDL's types in declaration order, with the byte size of the
/// fixed-size ones (zero-copy structs and types copied from another IDL).
#[derive(Default)]
pub struct Types {
    list: Vec<Value>,
    sizes: BTreeMap<String, usize>,
}

impl Types {
    /// Size in bytes of a fixed-size IDL type; panics for a variable-size one.
    pub fn size(&self, t: &Value) -> usize {
        match t {
            Value::String(s) => match s.as_str() {
                "u8" | "i8" | "bool" => 1,
                "u16" | "i16" => 2,
                "u32" | "i32" | "f32" => 4,
                "u64" | "i64" | "f64" => 8,
                "pubkey" => 32,
                other => panic!("{other} has no fixed size"),
            },
            Value::Object(o) if o.contains_key("array") => {
                let a = o["array"].as_array().unwrap();
                let n = usize::try_from(a[1].as_u64().unwrap()).unwrap();
                self.size(&a[0]).checked_mul(n).unwrap()
            }
            Value::Object(o) if o.contains_key("defined") => {
                let name = o["defined"]["name"].as_str().unwrap();
                *self.sizes.get(name).unwrap_or_else(|| panic!("{name} is not a fixed-size type declared before its use"))
            }
            other => panic!("{other} has no fixed size"),
        }
    }

    /// The sum of the field sizes of a declared struct (its Borsh size when
    /// every field has a fixed size).
    pub fn fields_size(&self, name: &str) -> usize {
        let t = self.get(name).unwrap_or_else(|| panic!("{name} is not declared"));
        t["type"]["fields"].as_array().unwrap().iter().map(|f| self.size(&f["type"])).sum()
    }

    /// A declared type by name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.list.iter().find(|t| t["name"] == name)
    }

    /// A zero-copy struct: fields in order, each checked to start where the
    /// previous one ended, and the whole to tile the struct. Use [`zero_copy!`].
    pub fn zero_copy(&mut self, name: &str, size: usize, fields: &[(&str, usize, Value)]) {
        let mut next = 0usize;
        let mut out = Vec::new();
        for (field, offset, t) in fields {
            assert_eq!(*offset, next, "{name}.{field}: descriptor offset disagrees with the struct");
            next = next.checked_add(self.size(t)).unwrap();
            out.push(json!({ "name": field, "type": t }));
        }
        assert_eq!(next, size, "{name}: descriptors do not tile the struct");
        self.sizes.insert(name.to_string(), size);
        self.list.push(json!({
            "name": name,
            "serialization": "bytemuck",
            "repr": { "kind": "c" },
            "type": { "kind": "struct", "fields": out },
        }));
    }

    /// A Borsh struct (instruction parameters, events, Borsh accounts).
    pub fn borsh(&mut self, name: &str, fields: &[(&str, Value)]) {
        let fields: Vec<Value> = fields.iter().map(|(n, t)| json!({ "name": n, "type": t })).collect();
        self.list.push(json!({ "name": name, "type": { "kind": "struct", "fields": fields } }));
    }

    /// Copies the type `name` from another program's IDL, checking that its
    /// fields, all of fixed size, add up to `size` (the struct it mirrors).
    pub fn copy_from(&mut self, idl: &Value, name: &str, size: usize) {
        let t = idl["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not a type of {}", idl["metadata"]["name"]))
            .clone();
        let bytes: usize = t["type"]["fields"].as_array().unwrap().iter().map(|f| self.size(&f["type"])).sum();
        assert_eq!(bytes, size, "{name} in {} does not match the struct", idl["metadata"]["name"]);
        self.sizes.insert(name.to_string(), size);
        self.list.push(t);
    }
}

/// `zero_copy!(types, Type, "IdlName", field: idl_type, ...)`: declares a
/// zero-copy struct, each descriptor checked against the struct's layout.
#[macro_export]
macro_rules! zero_copy {
    ($types:expr, $t:ty, $name:expr, $($f:ident: $ft:expr),+ $(,)?) => {
        $types.zero_copy(
            $name,
            ::core::mem::size_of::<$t>(),
            &[$((::core::stringify!($f), ::core::mem::offset_of!($t, $f), $ft)),+],
        )
    };
}

/// An instruction: its accounts and the name of its parameters type (every
/// instruction takes one `params` argument; an empty struct where there are no
/// arguments, because anchor-go v1.0.0 emits no discriminator for an
/// instruction without arguments).
pub struct Instruction {
    pub accounts: Vec<Value>,
    pub params: &'static str,
}

/// Everything an IDL holds, in the order Anchor writes it.
pub struct Idl<'a> {
    /// The program name (`psyche_<program>`, the .so and IDL file name).
    pub name: &'a str,
    pub description: &'a str,
    pub address: [u8; 32],
    /// Instruction names and discriminators in IDL order, and the shape of
    /// each, in the same order.
    pub instructions: &'a [(&'a str, [u8; 8])],
    pub shapes: Vec<Instruction>,
    /// Account names and discriminators.
    pub accounts: &'a [(&'a str, [u8; 8])],
    /// Event names and discriminators (each event's payload is a type of the
    /// same name).
    pub events: &'a [(&'a str, [u8; 8])],
    /// Program errors: code, name, message.
    pub errors: Vec<(u32, &'a str, &'a str)>,
    pub types: Types,
}

impl Idl<'_> {
    /// The IDL as pretty-printed JSON with a final newline, as committed.
    pub fn render(&self) -> String {
        assert_eq!(self.shapes.len(), self.instructions.len(), "one shape per instruction");
        let instructions: Vec<Value> = self
            .instructions
            .iter()
            .zip(&self.shapes)
            .map(|((name, disc), shape)| {
                json!({ "name": name, "discriminator": disc, "accounts": shape.accounts,
                        "args": [{ "name": "params", "type": defined(shape.params) }] })
            })
            .collect();
        let named = |list: &[(&str, [u8; 8])]| -> Vec<Value> {
            list.iter().map(|(name, disc)| json!({ "name": name, "discriminator": disc })).collect()
        };
        for (event, _) in self.events {
            assert!(self.types.get(event).is_some(), "event {event} has no type");
        }
        let errors: Vec<Value> =
            self.errors.iter().map(|(code, name, msg)| json!({ "code": code, "name": name, "msg": msg })).collect();
        let idl = json!({
            "address": address(&self.address),
            "metadata": {
                "name": self.name,
                "version": "0.1.0",
                "spec": "0.1.0",
                "description": self.description,
            },
            "instructions": instructions,
            "accounts": named(self.accounts),
            "events": named(self.events),
            "errors": errors,
            "types": self.types.list,
        });
        let mut s = serde_json::to_string_pretty(&idl).unwrap();
        s.push('\n');
        s
    }
}

/// The path of a committed IDL, `idl/<name>.json` at the repository root.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../idl")).join(format!("{name}.json"))
}

/// The committed IDL `idl/<name>.json`, parsed.
pub fn committed(name: &str) -> Value {
    let path = path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The discriminator of the item `name` in `list` ("instructions",
/// "accounts" or "events") of a parsed IDL.
pub fn discriminator(idl: &Value, list: &str, name: &str) -> [u8; 8] {
    let item = idl[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the {list} of {}", idl["metadata"]["name"]));
    let bytes: Vec<u8> =
        item["discriminator"].as_array().unwrap().iter().map(|b| u8::try_from(b.as_u64().unwrap()).unwrap()).collect();
    bytes.try_into().unwrap()
}

/// Fails unless the committed `idl/<name>.json` is `fresh`; with `UPDATE_IDL`
/// set, writes it instead. `package` names the crate whose test generates it.
pub fn check_committed(name: &str, fresh: &str, package: &str) {
    let path = path(name);
    if std::env::var_os("UPDATE_IDL").is_some() {
        std::fs::write(&path, fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is stale: run UPDATE_IDL=1 cargo test -p {package} and commit it",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(dead_code)] // only the layout is used
    #[repr(C)]
    struct Pair {
        a: u32,
        b: u64,
    }

    #[allow(dead_code)] // only the layout is used
    #[repr(C)]
    struct Padded {
        a: u32,
        _padding: [u8; 4],
        b: u64,
    }

    #[test]
    fn a_descriptor_that_disagrees_with_the_struct_fails() {
        let r = std::panic::catch_unwind(|| {
            let mut t = Types::default();
            zero_copy!(t, Pair, "Pair", a: json!("u32"), b: json!("u64"));
        });
        assert!(r.is_err(), "b starts at 8, after 4 bytes of padding");
        let mut t = Types::default();
        zero_copy!(t, Padded, "Padded", a: json!("u32"), _padding: bytes(4), b: json!("u64"));
        assert_eq!(t.size(&defined("Padded")), 16);
    }

    #[test]
    fn sizes() {
        let mut t = Types::default();
        t.borsh("P", &[("x", json!("u16")), ("k", json!("pubkey")), ("a", array(json!("u64"), 3))]);
        assert_eq!(t.fields_size("P"), 2 + 32 + 24);
        assert!(std::panic::catch_unwind(|| Types::default().size(&json!("string"))).is_err());
        assert!(std::panic::catch_unwind(|| Types::default().size(&defined("Undeclared"))).is_err());
    }

    #[test]
    fn addresses_render_in_base58() {
        assert_eq!(address(&[0; 32]), SYSTEM_PROGRAM);
    }
}
