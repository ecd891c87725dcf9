package chain

// anchorErrors are the framework error codes of Anchor that our programs reuse
// for the same failures, so clients and explorers show familiar names. A test
// keeps it in step with the SDK's ErrorCode.
var anchorErrors = func() map[uint32]ProgramError {
	m := map[uint32]ProgramError{}
	for _, e := range []ProgramError{
		{100, "InstructionMissing", "8 byte instruction identifier not provided"},
		{101, "InstructionFallbackNotFound", "Fallback functions are not supported"},
		{102, "InstructionDidNotDeserialize", "The program could not deserialize the given instruction"},
		{103, "InstructionDidNotSerialize", "The program could not serialize the given instruction"},
		{2000, "ConstraintMut", "A mut constraint was violated"},
		{2001, "ConstraintHasOne", "A has one constraint was violated"},
		{2002, "ConstraintSigner", "A signer constraint was violated"},
		{2003, "ConstraintRaw", "A raw constraint was violated"},
		{2004, "ConstraintOwner", "An owner constraint was violated"},
		{2005, "ConstraintRentExempt", "A rent exemption constraint was violated"},
		{2006, "ConstraintSeeds", "A seeds constraint was violated"},
		{2007, "ConstraintExecutable", "An executable constraint was violated"},
		{2011, "ConstraintClose", "A close constraint was violated"},
		{2012, "ConstraintAddress", "An address constraint was violated"},
		{2013, "ConstraintZero", "Expected zero account discriminant"},
		{2014, "ConstraintTokenMint", "A token mint constraint was violated"},
		{2015, "ConstraintTokenOwner", "A token owner constraint was violated"},
		{2019, "ConstraintSpace", "A space constraint was violated"},
		{3000, "AccountDiscriminatorAlreadySet", "The account discriminator was already set on this account"},
		{3001, "AccountDiscriminatorNotFound", "No discriminator was found on the account"},
		{3002, "AccountDiscriminatorMismatch", "Account discriminator did not match what was expected"},
		{3003, "AccountDidNotDeserialize", "Failed to deserialize the account"},
		{3004, "AccountDidNotSerialize", "Failed to serialize the account"},
		{3005, "AccountNotEnoughKeys", "Not enough account keys given to the instruction"},
		{3006, "AccountNotMutable", "The given account is not mutable"},
		{3007, "AccountOwnedByWrongProgram", "The given account is owned by a different program than expected"},
		{3008, "InvalidProgramId", "Program ID was not as expected"},
		{3009, "InvalidProgramExecutable", "Program account is not executable"},
		{3010, "AccountNotSigner", "The given account did not sign"},
		{3011, "AccountNotSystemOwned", "The given account is not owned by the system program"},
		{3012, "AccountNotInitialized", "The program expected this account to be already initialized"},
		{3013, "AccountNotProgramData", "The given account is not a program data account"},
		{3014, "AccountNotAssociatedTokenAccount", "The given account is not the associated token account"},
		{3015, "AccountSysvarMismatch", "The given public key does not match the required sysvar"},
		{3016, "AccountReallocExceedsLimit", "The account reallocation exceeds the MAX_PERMITTED_DATA_INCREASE limit"},
		{3017, "AccountDuplicateReallocs", "The account was duplicated for more than one reallocation"},
		{4100, "DeclaredProgramIdMismatch", "The declared program id does not match the actual program id"},
		{4102, "InvalidNumericConversion", "Error during numeric conversion"},
		// Ours, not Anchor's: the SDK on the host, where syscalls do not exist.
		{4900, "OnChainOnly", "This operation needs the Solana runtime"},
	} {
		m[e.Code] = e
	}
	return m
}()
