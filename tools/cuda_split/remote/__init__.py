"""`nvcc-split --remote`: the REAPI client (`reapi`), the messages it sends (`schema`) and
nvcc-split's steps as REAPI actions with the policy around them (`actions`)."""
