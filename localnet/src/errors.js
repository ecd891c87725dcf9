// JSON-RPC error codes as a real validator answers them.
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
export const BLOCK_CLEANED_UP = -32001;
export const SEND_TRANSACTION_PREFLIGHT_FAILURE = -32002;
export const TRANSACTION_SIGNATURE_VERIFICATION_FAILURE = -32003;
export const BLOCK_NOT_AVAILABLE = -32004;
export const SLOT_SKIPPED = -32007;
export const NO_SNAPSHOT = -32008;
export const UNSUPPORTED_TRANSACTION_VERSION = -32015;
export const SLOT_NOT_EPOCH_BOUNDARY = -32018;

export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
  toJSON() {
    const e = { code: this.code, message: this.message };
    if (this.data !== undefined) e.data = this.data;
    return e;
  }
}

export const invalidParams = (message) => new RpcError(INVALID_PARAMS, message);
