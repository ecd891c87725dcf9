// The litesvm native binding. We use it directly rather than through the
// @solana/kit wrapper: the RPC layer already holds raw transaction bytes.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const native = require('litesvm/dist/internal.js');

export const {
  Account, Clock, EpochSchedule, LiteSvm, FailedTransactionMetadata, SimulatedTransactionInfo, SlotHistory,
  InstructionErrorBorshIo, InstructionErrorCustom, TransactionErrorDuplicateInstruction,
  TransactionErrorInstructionError, TransactionErrorInsufficientFundsForRent,
  TransactionErrorProgramExecutionTemporarilyRestricted,
} = native;
