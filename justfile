# Recipes for working on this repo; `scripts/setup.sh` installs just into bin/.

# `just dev <recipe>`: localnet and devnet test runs (scripts/dev/README.md).
mod dev 'scripts/dev/dev.just'

# Install whatever is missing (apt, npm, Go modules).
setup:
    bash scripts/setup.sh

# Run every test suite.
test *ARGS:
    bash scripts/test.sh {{ARGS}}

# Run the local validator in the foreground (flags: see scripts/localnet.sh).
localnet *ARGS:
    bash scripts/localnet.sh {{ARGS}}

# Build the on-chain programs into programs/target/deploy.
build-programs *ARGS:
    bash scripts/build-programs.sh {{ARGS}}

# Regenerate the Go bindings from idl/.
gen-bindings:
    bash scripts/gen-bindings.sh
