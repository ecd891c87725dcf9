# Run `just --list` for the recipes; `scripts/setup.sh` installs just into bin/.

# Install whatever is missing (apt, npm, Go modules).
setup:
    bash scripts/setup.sh

# Run every test suite.
test *ARGS:
    bash scripts/test.sh {{ARGS}}
