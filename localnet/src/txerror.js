// Transaction errors from the litesvm binding, as JSON in the shape of the
// real RPC (serde's encoding of solana_transaction_error::TransactionError).
import {
  InstructionErrorBorshIo, InstructionErrorCustom, TransactionErrorDuplicateInstruction,
  TransactionErrorInstructionError, TransactionErrorInsufficientFundsForRent,
  TransactionErrorProgramExecutionTemporarilyRestricted,
} from './svm.js';

// Variant names in declaration order: the binding exposes these enums as numbers.
const TX_ERRORS = [
  'AccountInUse', 'AccountLoadedTwice', 'AccountNotFound', 'ProgramAccountNotFound', 'InsufficientFundsForFee',
  'InvalidAccountForFee', 'AlreadyProcessed', 'BlockhashNotFound', 'CallChainTooDeep', 'MissingSignatureForFee',
  'InvalidAccountIndex', 'SignatureFailure', 'InvalidProgramForExecution', 'SanitizeFailure', 'ClusterMaintenance',
  'AccountBorrowOutstanding', 'WouldExceedMaxBlockCostLimit', 'UnsupportedVersion', 'InvalidWritableAccount', 'WouldExceedMaxAccountCostLimit',
  'WouldExceedAccountDataBlockLimit', 'TooManyAccountLocks', 'AddressLookupTableNotFound', 'InvalidAddressLookupTableOwner', 'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex', 'InvalidRentPayingAccount', 'WouldExceedMaxVoteCostLimit', 'WouldExceedAccountDataTotalLimit', 'MaxLoadedAccountsDataSizeExceeded',
  'ResanitizationNeeded', 'InvalidLoadedAccountsDataSizeLimit', 'UnbalancedTransaction', 'ProgramCacheHitMaxLimit', 'CommitCancelled',
];
const INSTRUCTION_ERRORS = [
  'GenericError', 'InvalidArgument', 'InvalidInstructionData', 'InvalidAccountData', 'AccountDataTooSmall',
  'InsufficientFunds', 'IncorrectProgramId', 'MissingRequiredSignature', 'AccountAlreadyInitialized', 'UninitializedAccount',
  'UnbalancedInstruction', 'ModifiedProgramId', 'ExternalAccountLamportSpend', 'ExternalAccountDataModified', 'ReadonlyLamportChange',
  'ReadonlyDataModified', 'DuplicateAccountIndex', 'ExecutableModified', 'RentEpochModified', 'NotEnoughAccountKeys',
  'AccountDataSizeChanged', 'AccountNotExecutable', 'AccountBorrowFailed', 'AccountBorrowOutstanding', 'DuplicateAccountOutOfSync',
  'InvalidError', 'ExecutableDataModified', 'ExecutableLamportChange', 'ExecutableAccountNotRentExempt', 'UnsupportedProgramId',
  'CallDepth', 'MissingAccount', 'ReentrancyNotAllowed', 'MaxSeedLengthExceeded', 'InvalidSeeds',
  'InvalidRealloc', 'ComputationalBudgetExceeded', 'PrivilegeEscalation', 'ProgramEnvironmentSetupFailure', 'ProgramFailedToComplete',
  'ProgramFailedToCompile', 'Immutable', 'IncorrectAuthority', 'AccountNotRentExempt', 'InvalidAccountOwner',
  'ArithmeticOverflow', 'UnsupportedSysvar', 'IllegalOwner', 'MaxAccountsDataAllocationsExceeded', 'MaxAccountsExceeded',
  'MaxInstructionTraceLengthExceeded', 'BuiltinProgramsMustConsumeComputeUnits', 'BorshIoError',
];

function instructionErrorJSON(e) {
  if (typeof e === 'number') return INSTRUCTION_ERRORS[e] ?? `UnknownInstructionError(${e})`;
  if (e instanceof InstructionErrorCustom) return { Custom: e.code };
  if (e instanceof InstructionErrorBorshIo) return 'BorshIoError';
  return String(e);
}

/** The JSON form of a litesvm transaction error. */
export function txErrorJSON(e) {
  if (typeof e === 'number') return TX_ERRORS[e] ?? `UnknownTransactionError(${e})`;
  if (e instanceof TransactionErrorInstructionError) return { InstructionError: [e.index, instructionErrorJSON(e.err())] };
  if (e instanceof TransactionErrorDuplicateInstruction) return { DuplicateInstruction: e.index };
  if (e instanceof TransactionErrorInsufficientFundsForRent) return { InsufficientFundsForRent: { account_index: e.accountIndex } };
  if (e instanceof TransactionErrorProgramExecutionTemporarilyRestricted) {
    return { ProgramExecutionTemporarilyRestricted: { account_index: e.accountIndex } };
  }
  return String(e);
}

/** A human-readable message for an error, like the Display form in Agave. */
export function txErrorMessage(err) {
  if (typeof err === 'string') return TX_ERROR_MESSAGES[err] ?? err;
  if (err && err.InstructionError) {
    const [index, ie] = err.InstructionError;
    const what = ie && ie.Custom !== undefined ? `custom program error: 0x${ie.Custom.toString(16)}` : String(ie);
    return `Error processing Instruction ${index}: ${what}`;
  }
  return JSON.stringify(err);
}

const TX_ERROR_MESSAGES = {
  AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
  AlreadyProcessed: 'This transaction has already been processed',
  BlockhashNotFound: 'Blockhash not found',
  InsufficientFundsForFee: 'Insufficient funds for fee',
  SignatureFailure: 'Transaction did not pass signature verification',
  ProgramAccountNotFound: 'Attempt to load a program that does not exist',
};
