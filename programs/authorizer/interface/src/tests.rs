use super::*;

extern crate std;
use std::vec::Vec;

fn addr(b: u8) -> Address {
    Address::new_from_array([b; 32])
}

/// Encodes an account the way the program writes it.
fn encode(grantor: &Address, grantee: &Address, scope: &[u8], active: bool, delegates: &[Address]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&AUTHORIZATION_ACCOUNT);
    v.push(254);
    v.extend_from_slice(grantor.as_ref());
    v.extend_from_slice(grantee.as_ref());
    v.extend_from_slice(&(scope.len() as u32).to_le_bytes());
    v.extend_from_slice(scope);
    v.push(active as u8);
    v.extend_from_slice(&(delegates.len() as u32).to_le_bytes());
    for d in delegates {
        v.extend_from_slice(d.as_ref());
    }
    v.extend_from_slice(&(-7i64).to_le_bytes());
    v
}

#[test]
fn decode_round_trip_and_offsets() {
    let data = encode(&addr(1), &addr(2), b"CoordinatorJoinRun", true, &[addr(3), addr(4)]);
    assert_eq!(data.len(), space(18, 2));
    let a = Authorization::decode(&data).unwrap();
    assert_eq!(a.bump, 254);
    assert_eq!(a.grantor, addr(1));
    assert_eq!(a.grantee, addr(2));
    assert_eq!(a.scope, b"CoordinatorJoinRun");
    assert!(a.active);
    assert_eq!(a.delegates_len(), 2);
    assert_eq!(a.delegate(1), Some(addr(4)));
    assert_eq!(a.delegate(2), None);
    assert_eq!(a.grantor_update_unix_timestamp, -7);
    assert_eq!(data[offsets::active(18)], 1);
    assert_eq!(data[offsets::delegates_len(18)], 2);
    assert_eq!(&data[offsets::GRANTEE..offsets::GRANTEE + 32], addr(2).as_ref());
}

#[test]
fn validity_rule() {
    let scope: &[u8] = b"CoordinatorJoinRun";
    let (grantor, grantee, delegate, stranger) = (addr(1), addr(2), addr(3), addr(9));
    let data = encode(&grantor, &grantee, scope, true, core::slice::from_ref(&delegate));
    let a = Authorization::decode(&data).unwrap();
    assert!(a.is_valid_for(&grantor, &grantee, scope));
    assert!(a.is_valid_for(&grantor, &delegate, scope));
    assert!(!a.is_valid_for(&grantor, &stranger, scope));
    assert!(!a.is_valid_for(&stranger, &grantee, scope), "wrong grantor");
    assert!(!a.is_valid_for(&grantor, &grantee, b"OtherScope"), "wrong scope");
    assert!(!a.is_valid_for(&grantor, &grantee, b"CoordinatorJoinRu"), "scope prefix");

    let inactive = encode(&grantor, &grantee, scope, false, core::slice::from_ref(&delegate));
    let a = Authorization::decode(&inactive).unwrap();
    assert!(!a.is_valid_for(&grantor, &grantee, scope));
    assert!(!a.is_valid_for(&grantor, &delegate, scope));

    let open = encode(&grantor, &EVERYONE, scope, true, &[]);
    let a = Authorization::decode(&open).unwrap();
    assert!(a.is_valid_for(&grantor, &stranger, scope));
    assert!(!a.is_valid_for(&stranger, &stranger, scope));
}

#[test]
fn decode_rejects_malformed_data() {
    let good = encode(&addr(1), &addr(2), b"s", true, &[addr(3)]);
    let mut wrong_disc = good.clone();
    wrong_disc[0] ^= 1;
    let mut bad_bool = good.clone();
    bad_bool[offsets::active(1)] = 2;
    let mut trailing = good.clone();
    trailing.push(0);
    let mut huge_len = good.clone();
    huge_len[offsets::delegates_len(1)..offsets::delegates_len(1) + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let long_scope = encode(&addr(1), &addr(2), &[7u8; 33], true, &[]);
    let many: Vec<Address> = (0..33).map(addr).collect();
    let too_many = encode(&addr(1), &addr(2), b"s", true, &many);
    for (name, data) in [
        ("empty", &[][..]),
        ("truncated", &good[..good.len() - 1]),
        ("wrong discriminator", &wrong_disc[..]),
        ("bool tag 2", &bad_bool[..]),
        ("trailing byte", &trailing[..]),
        ("hostile delegate count", &huge_len[..]),
        ("scope over 32 bytes", &long_scope[..]),
        ("33 delegates", &too_many[..]),
    ] {
        assert!(Authorization::decode(data).is_err(), "{name} decoded");
    }
}

/// The program, its IDL and the Go bindings must agree; this side checks the
/// program's constants against idl/psyche_authorizer.json.
#[test]
fn matches_idl() {
    let idl = psyche_idl::committed("psyche_authorizer");
    let address = idl["address"].as_str().unwrap();
    assert_eq!(base58::decode_32(address), Some(ID.to_bytes()), "IDL address vs declared ID");

    assert_eq!(idl["accounts"][0]["name"], "Authorization");
    assert_eq!(psyche_idl::discriminator(&idl, "accounts", "Authorization"), AUTHORIZATION_ACCOUNT);

    let errors = idl["errors"].as_array().unwrap();
    let ours = [
        AuthorizerError::ScopeTooLong,
        AuthorizerError::TooManyDelegates,
        AuthorizerError::AuthorizationStillActive,
        AuthorizerError::GrantorMismatch,
        AuthorizerError::GranteeMismatch,
        AuthorizerError::AuthorizationAlreadyExists,
    ];
    assert_eq!(errors.len(), ours.len(), "IDL and program list different numbers of errors");
    for (e, o) in errors.iter().zip(ours) {
        assert_eq!(e["code"].as_u64(), Some(o.code() as u64));
        assert_eq!(e["name"].as_str(), Some(o.name()));
        assert_eq!(e["msg"].as_str(), Some(o.message()));
    }

    let fields: Vec<&str> = idl["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Authorization")
        .unwrap()["type"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["bump", "grantor", "grantee", "scope", "active", "delegates", "grantor_update_unix_timestamp"]);
}
