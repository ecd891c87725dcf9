// The `jsonParsed` transaction encoding, in the JSON shapes of Agave's
// transaction-status crate: account keys as {pubkey, writable, signer,
// source}, and instructions of the programs Agave parses (System, SPL Token
// and Token-2022, the associated token account program, SPL Memo) as
// {program, programId, parsed: {type, info}, stackHeight}. Every other
// instruction, and one that does not decode, is partially decoded as
// {programId, accounts, data, stackHeight}, as Agave answers it.
import * as bs58 from './base58.js';
import { uiTokenAmount } from './chain.js';
import { u64JSON } from './json.js';

const addr = (s) => {
  const b = bs58.decodeAddress(s);
  if (!b) throw new Error(`bad builtin address ${s}`);
  return b;
};

const SYSTEM = '11111111111111111111111111111111';
const TOKEN = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
const TOKEN_2022 = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
const ATA = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL';
const MEMO_V1 = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
const MEMO_V3 = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr';
const UPGRADEABLE_LOADER = 'BPFLoaderUpgradeab1e11111111111111111111111';

// Keys no transaction may write-lock (Agave's reserved account keys, all
// activated): jsonParsed reports them read-only whatever the header says.
const RESERVED = new Set([
  'AddressLookupTab1e1111111111111111111111111', 'BPFLoader2111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111', UPGRADEABLE_LOADER,
  'ComputeBudget111111111111111111111111111111', 'Config1111111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111', 'Feature111111111111111111111111111111111111',
  'LoaderV411111111111111111111111111111111111', 'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111', 'StakeConfig11111111111111111111111111111111',
  'Stake11111111111111111111111111111111111111', SYSTEM, 'Vote111111111111111111111111111111111111111',
  'ZkE1Gama1Proof11111111111111111111111111111', 'ZkTokenProof1111111111111111111111111111111',
  'SysvarC1ock11111111111111111111111111111111', 'SysvarEpochRewards1111111111111111111111111',
  'SysvarEpochSchedu1e111111111111111111111111', 'SysvarFees111111111111111111111111111111111',
  'Sysvar1nstructions1111111111111111111111111', 'SysvarLastRestartS1ot1111111111111111111111',
  'SysvarRecentB1ockHashes11111111111111111111', 'SysvarRent111111111111111111111111111111111',
  'SysvarRewards111111111111111111111111111111', 'SysvarS1otHashes111111111111111111111111111',
  'SysvarS1otHistory11111111111111111111111111', 'SysvarStakeHistory1111111111111111111111111',
  'NativeLoader1111111111111111111111111111111', 'Sysvar1111111111111111111111111111111111111',
]);
for (const k of RESERVED) addr(k); // a typo here would silently mark a key writable

/**
 * The account keys of a recorded transaction as jsonParsed lists them:
 * keys holds the static keys (source "transaction") then the keys loaded
 * from lookup tables (source "lookupTable"), nLoadedWritable of them
 * writable. A key is writable when the header (or its lookup) makes it so,
 * it is not reserved, and it is not an invoked program unless the
 * upgradeable loader is among the keys (Agave's demotion rule).
 */
export function parsedAccountKeys(message, keys, nLoadedWritable = 0) {
  const h = message.header;
  const nStatic = message.accountKeys.length;
  const encoded = keys.map((k) => (typeof k === 'string' ? k : bs58.encode(k)));
  const programs = new Set(message.instructions.map((ix) => ix.programIdIndex));
  const loaderPresent = encoded.includes(UPGRADEABLE_LOADER);
  return encoded.map((pubkey, i) => {
    let writable;
    if (i >= nStatic) writable = i - nStatic < nLoadedWritable;
    else if (i < h.numRequiredSignatures) writable = i < h.numRequiredSignatures - h.numReadonlySignedAccounts;
    else writable = i < nStatic - h.numReadonlyUnsignedAccounts;
    if (RESERVED.has(pubkey) || (programs.has(i) && !loaderPresent)) writable = false;
    return { pubkey, writable, signer: i < h.numRequiredSignatures, source: i < nStatic ? 'transaction' : 'lookupTable' };
  });
}

/** A partially decoded instruction: program id, account addresses, base58 data. */
function partial(ix, keys, stackHeight) {
  return {
    programId: keys[ix.programIdIndex], accounts: ix.accounts.map((a) => keys[a]), data: bs58.encode(ix.data), stackHeight,
  };
}

/**
 * One instruction in the jsonParsed encoding. keys: base58 account keys of
 * the transaction (static then loaded); ix: {programIdIndex, accounts, data}.
 */
export function parseInstruction(ix, keys, stackHeight = null) {
  const programId = keys[ix.programIdIndex];
  const parser = PARSERS[programId];
  if (parser) {
    let parsed = null;
    try {
      parsed = parser.parse(ix, keys);
    } catch (e) {
      if (!(e instanceof NotParsable)) throw e;
    }
    if (parsed !== null) return { program: parser.program, programId, parsed, stackHeight };
  }
  return partial(ix, keys, stackHeight);
}

class NotParsable extends Error {}
const fail = () => { throw new NotParsable(); };

// Reads instruction data as bincode/borsh/Pack would, failing (-> partially
// decoded) on truncated input. Trailing bytes are allowed, as bincode's
// default options and the token program's unpack allow them.
class Data {
  constructor(buf) {
    this.buf = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
    this.off = 0;
  }
  need(n) {
    if (this.off + n > this.buf.length) fail();
  }
  u8() { this.need(1); return this.buf[this.off++]; }
  u32() { this.need(4); const v = this.buf.readUInt32LE(this.off); this.off += 4; return v; }
  u64() { this.need(8); const v = this.buf.readBigUInt64LE(this.off); this.off += 8; return v; }
  pubkey() { this.need(32); const v = bs58.encode(this.buf.subarray(this.off, this.off + 32)); this.off += 32; return v; }
  // bincode String: u64 length, UTF-8 bytes.
  string() {
    const n = this.u64();
    if (n > BigInt(this.buf.length)) fail();
    this.need(Number(n));
    const bytes = this.buf.subarray(this.off, this.off + Number(n));
    this.off += Number(n);
    return utf8(bytes);
  }
  rest() { return this.buf.subarray(this.off); }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });
function utf8(bytes) {
  try {
    return UTF8.decode(bytes);
  } catch {
    return fail();
  }
}

// Every account index must name a key (the runtime guarantees it; Agave
// checks anyway), and at least n accounts must be given.
function accountsAtLeast(ix, keys, n) {
  if (!ix.accounts.length || Math.max(...ix.accounts) >= keys.length) fail();
  if (ix.accounts.length < n) fail();
  return (i) => keys[ix.accounts[i]];
}

// ---- System program ----

function parseSystem(ix, keys) {
  const d = new Data(ix.data);
  const tag = d.u32();
  const key = (n) => accountsAtLeast(ix, keys, n);
  switch (tag) {
    case 0: { // CreateAccount
      const lamports = d.u64(); const space = d.u64(); const owner = d.pubkey();
      const k = key(2);
      return { type: 'createAccount', info: { source: k(0), newAccount: k(1), lamports: u64JSON(lamports), space: u64JSON(space), owner } };
    }
    case 1: { const owner = d.pubkey(); const k = key(1); return { type: 'assign', info: { account: k(0), owner } }; }
    case 2: {
      const lamports = d.u64(); const k = key(2);
      return { type: 'transfer', info: { source: k(0), destination: k(1), lamports: u64JSON(lamports) } };
    }
    case 3: { // CreateAccountWithSeed
      const base = d.pubkey(); const seed = d.string(); const lamports = d.u64(); const space = d.u64(); const owner = d.pubkey();
      const k = key(2);
      return {
        type: 'createAccountWithSeed',
        info: { source: k(0), newAccount: k(1), base, seed, lamports: u64JSON(lamports), space: u64JSON(space), owner },
      };
    }
    case 4: {
      const k = key(3);
      return { type: 'advanceNonce', info: { nonceAccount: k(0), recentBlockhashesSysvar: k(1), nonceAuthority: k(2) } };
    }
    case 5: {
      const lamports = d.u64(); const k = key(5);
      return {
        type: 'withdrawFromNonce',
        info: {
          nonceAccount: k(0), destination: k(1), recentBlockhashesSysvar: k(2), rentSysvar: k(3), nonceAuthority: k(4),
          lamports: u64JSON(lamports),
        },
      };
    }
    case 6: {
      const authority = d.pubkey(); const k = key(3);
      return { type: 'initializeNonce', info: { nonceAccount: k(0), recentBlockhashesSysvar: k(1), rentSysvar: k(2), nonceAuthority: authority } };
    }
    case 7: {
      const authority = d.pubkey(); const k = key(2);
      return { type: 'authorizeNonce', info: { nonceAccount: k(0), nonceAuthority: k(1), newAuthorized: authority } };
    }
    case 8: { const space = d.u64(); const k = key(1); return { type: 'allocate', info: { account: k(0), space: u64JSON(space) } }; }
    case 9: {
      const base = d.pubkey(); const seed = d.string(); const space = d.u64(); const owner = d.pubkey(); const k = key(2);
      return { type: 'allocateWithSeed', info: { account: k(0), base, seed, space: u64JSON(space), owner } };
    }
    case 10: {
      const base = d.pubkey(); const seed = d.string(); const owner = d.pubkey(); const k = key(2);
      return { type: 'assignWithSeed', info: { account: k(0), base, seed, owner } };
    }
    case 11: {
      const lamports = d.u64(); const seed = d.string(); const owner = d.pubkey(); const k = key(3);
      return {
        type: 'transferWithSeed',
        info: { source: k(0), sourceBase: k(1), destination: k(2), lamports: u64JSON(lamports), sourceSeed: seed, sourceOwner: owner },
      };
    }
    case 12: { const k = key(1); return { type: 'upgradeNonce', info: { nonceAccount: k(0) } }; }
    default: return fail();
  }
}

// ---- SPL Token and Token-2022 (both reported as program "spl-token") ----

const AUTHORITY_TYPES = [
  'mintTokens', 'freezeAccount', 'accountOwner', 'closeAccount', 'transferFeeConfig', 'withheldWithdraw', 'closeMint',
  'interestRate', 'permanentDelegate', 'confidentialTransferMint', 'transferHookProgramId',
  'confidentialTransferFeeConfig', 'metadataPointer', 'groupPointer', 'groupMemberPointer', 'scaledUiAmount', 'pause',
];
const ACCOUNT_AUTHORITIES = new Set(['accountOwner', 'closeAccount']);
const EXTENSION_TYPES = [
  'uninitialized', 'transferFeeConfig', 'transferFeeAmount', 'mintCloseAuthority', 'confidentialTransferMint',
  'confidentialTransferAccount', 'defaultAccountState', 'immutableOwner', 'memoTransfer', 'nonTransferable',
  'interestBearingConfig', 'cpiGuard', 'permanentDelegate', 'nonTransferableAccount', 'transferHook',
  'transferHookAccount', 'confidentialTransferFeeConfig', 'confidentialTransferFeeAmount', 'metadataPointer',
  'tokenMetadata', 'groupPointer', 'groupMemberPointer', 'tokenGroup', 'tokenGroupMember', 'confidentialMintBurn',
  'scaledUiAmount', 'pausable', 'pausableAccount',
];

// A COption<Pubkey> as the token program packs it in instructions: a tag
// byte, then the key when the tag is 1.
function optionPubkey(d) {
  const tag = d.u8();
  if (tag === 0) return null;
  if (tag === 1) return d.pubkey();
  return fail();
}

// The authority at account position last, or (multisig) the multisig
// account there and the signers after it.
function signers(info, ix, keys, last, ownerField, multisigField) {
  const at = (i) => (i < ix.accounts.length && ix.accounts[i] < keys.length ? keys[ix.accounts[i]] : null);
  const owner = at(last);
  if (ix.accounts.length > last + 1) {
    if (owner) info[multisigField] = owner;
    info.signers = ix.accounts.slice(last + 1).filter((a) => a < keys.length).map((a) => keys[a]);
  } else if (owner) {
    info[ownerField] = owner;
  }
  return info;
}

function parseToken(ix, keys) {
  if (!ix.accounts.length || Math.max(...ix.accounts) >= keys.length) fail();
  const d = new Data(ix.data);
  const tag = d.u8();
  const need = (n) => accountsAtLeast(ix, keys, n);
  const amountOf = () => d.u64().toString();
  const checked = () => { const amount = d.u64(); const decimals = d.u8(); return uiTokenAmount(amount, decimals); };
  switch (tag) {
    case 0: case 20: { // InitializeMint, InitializeMint2
      const decimals = d.u8(); const mintAuthority = d.pubkey(); const freeze = optionPubkey(d);
      const k = need(tag === 0 ? 2 : 1);
      const info = { mint: k(0), decimals, mintAuthority };
      if (tag === 0) info.rentSysvar = k(1);
      if (freeze) info.freezeAuthority = freeze;
      return { type: tag === 0 ? 'initializeMint' : 'initializeMint2', info };
    }
    case 1: {
      const k = need(4);
      return { type: 'initializeAccount', info: { account: k(0), mint: k(1), owner: k(2), rentSysvar: k(3) } };
    }
    case 16: {
      const owner = d.pubkey(); const k = need(3);
      return { type: 'initializeAccount2', info: { account: k(0), mint: k(1), owner, rentSysvar: k(2) } };
    }
    case 18: {
      const owner = d.pubkey(); const k = need(2);
      return { type: 'initializeAccount3', info: { account: k(0), mint: k(1), owner } };
    }
    case 2: case 19: { // InitializeMultisig, InitializeMultisig2
      const m = d.u8(); const k = need(tag === 2 ? 3 : 2);
      const first = tag === 2 ? 2 : 1;
      const info = { multisig: k(0) };
      if (tag === 2) info.rentSysvar = k(1);
      info.signers = ix.accounts.slice(first).map((a) => keys[a]);
      info.m = m;
      return { type: tag === 2 ? 'initializeMultisig' : 'initializeMultisig2', info };
    }
    case 3: {
      const amount = amountOf(); const k = need(3);
      return { type: 'transfer', info: signers({ source: k(0), destination: k(1), amount }, ix, keys, 2, 'authority', 'multisigAuthority') };
    }
    case 4: {
      const amount = amountOf(); const k = need(3);
      return { type: 'approve', info: signers({ source: k(0), delegate: k(1), amount }, ix, keys, 2, 'owner', 'multisigOwner') };
    }
    case 5: {
      const k = need(2);
      return { type: 'revoke', info: signers({ source: k(0) }, ix, keys, 1, 'owner', 'multisigOwner') };
    }
    case 6: { // SetAuthority
      const authorityType = AUTHORITY_TYPES[d.u8()] ?? fail();
      const newAuthority = optionPubkey(d);
      const k = need(2);
      const info = { [ACCOUNT_AUTHORITIES.has(authorityType) ? 'account' : 'mint']: k(0), authorityType, newAuthority };
      return { type: 'setAuthority', info: signers(info, ix, keys, 1, 'authority', 'multisigAuthority') };
    }
    case 7: {
      const amount = amountOf(); const k = need(3);
      return { type: 'mintTo', info: signers({ mint: k(0), account: k(1), amount }, ix, keys, 2, 'mintAuthority', 'multisigMintAuthority') };
    }
    case 8: {
      const amount = amountOf(); const k = need(3);
      return { type: 'burn', info: signers({ account: k(0), mint: k(1), amount }, ix, keys, 2, 'authority', 'multisigAuthority') };
    }
    case 9: {
      const k = need(3);
      return { type: 'closeAccount', info: signers({ account: k(0), destination: k(1) }, ix, keys, 2, 'owner', 'multisigOwner') };
    }
    case 10: case 11: {
      const k = need(3);
      return {
        type: tag === 10 ? 'freezeAccount' : 'thawAccount',
        info: signers({ account: k(0), mint: k(1) }, ix, keys, 2, 'freezeAuthority', 'multisigFreezeAuthority'),
      };
    }
    case 12: {
      const tokenAmount = checked(); const k = need(4);
      return {
        type: 'transferChecked',
        info: signers({ source: k(0), mint: k(1), destination: k(2), tokenAmount }, ix, keys, 3, 'authority', 'multisigAuthority'),
      };
    }
    case 13: {
      const tokenAmount = checked(); const k = need(4);
      return {
        type: 'approveChecked',
        info: signers({ source: k(0), mint: k(1), delegate: k(2), tokenAmount }, ix, keys, 3, 'owner', 'multisigOwner'),
      };
    }
    case 14: {
      const tokenAmount = checked(); const k = need(3);
      return {
        type: 'mintToChecked',
        info: signers({ mint: k(0), account: k(1), tokenAmount }, ix, keys, 2, 'mintAuthority', 'multisigMintAuthority'),
      };
    }
    case 15: {
      const tokenAmount = checked(); const k = need(3);
      return { type: 'burnChecked', info: signers({ account: k(0), mint: k(1), tokenAmount }, ix, keys, 2, 'authority', 'multisigAuthority') };
    }
    case 17: { const k = need(1); return { type: 'syncNative', info: { account: k(0) } }; }
    case 21: { // GetAccountDataSize
      const rest = d.rest();
      if (rest.length % 2) fail();
      const types = [];
      for (let i = 0; i < rest.length; i += 2) types.push(EXTENSION_TYPES[rest.readUInt16LE(i)] ?? fail());
      const k = need(1);
      const info = { mint: k(0) };
      if (types.length) info.extensionTypes = types;
      return { type: 'getAccountDataSize', info };
    }
    case 22: { const k = need(1); return { type: 'initializeImmutableOwner', info: { account: k(0) } }; }
    case 23: { const amount = amountOf(); const k = need(1); return { type: 'amountToUiAmount', info: { mint: k(0), amount } }; }
    case 24: { const uiAmount = utf8(d.rest()); const k = need(1); return { type: 'uiAmountToAmount', info: { mint: k(0), uiAmount } }; }
    case 25: { // InitializeMintCloseAuthority
      const closeAuthority = optionPubkey(d); const k = need(1);
      return { type: 'initializeMintCloseAuthority', info: { mint: k(0), newAuthority: closeAuthority } };
    }
    case 31: {
      const k = need(3);
      return { type: 'createNativeMint', info: { payer: k(0), nativeMint: k(1), systemProgram: k(2) } };
    }
    case 32: { const k = need(1); return { type: 'initializeNonTransferableMint', info: { mint: k(0) } }; }
    case 35: {
      const delegate = d.pubkey(); const k = need(1);
      return { type: 'initializePermanentDelegate', info: { mint: k(0), delegate } };
    }
    case 38: {
      const k = need(3);
      return {
        type: 'withdrawExcessLamports',
        info: signers({ source: k(0), destination: k(1) }, ix, keys, 2, 'authority', 'multisigAuthority'),
      };
    }
    // Token-2022 extension instructions (transfer fees, confidential
    // transfers, metadata, ...) are left partially decoded.
    default: return fail();
  }
}

// ---- Associated token account program (borsh: empty data = Create) ----

function parseAssociatedToken(ix, keys) {
  if (!ix.accounts.length || Math.max(...ix.accounts) >= keys.length) fail();
  if (ix.data.length > 1) fail(); // borsh try_from_slice takes the whole input
  const tag = ix.data.length ? ix.data[0] : 0;
  if (tag === 0 || tag === 1) {
    const k = accountsAtLeast(ix, keys, 6);
    return {
      type: tag === 0 ? 'create' : 'createIdempotent',
      info: { source: k(0), account: k(1), wallet: k(2), mint: k(3), systemProgram: k(4), tokenProgram: k(5) },
    };
  }
  if (tag === 2) {
    const k = accountsAtLeast(ix, keys, 7);
    return {
      type: 'recoverNested',
      info: { nestedSource: k(0), nestedMint: k(1), destination: k(2), nestedOwner: k(3), ownerMint: k(4), wallet: k(5), tokenProgram: k(6) },
    };
  }
  return fail();
}

// ---- SPL Memo: the UTF-8 text itself ----

const parseMemo = (ix) => utf8(ix.data);

const PARSERS = {
  [SYSTEM]: { program: 'system', parse: parseSystem },
  [TOKEN]: { program: 'spl-token', parse: parseToken },
  [TOKEN_2022]: { program: 'spl-token', parse: parseToken },
  [ATA]: { program: 'spl-associated-token-account', parse: parseAssociatedToken },
  [MEMO_V1]: { program: 'spl-memo', parse: parseMemo },
  [MEMO_V3]: { program: 'spl-memo', parse: parseMemo },
};
for (const k of Object.keys(PARSERS)) addr(k);
