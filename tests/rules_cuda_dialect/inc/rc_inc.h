// Found through `includes = ["inc"]` (-isystem).
#define RC_INC_VALUE 5
