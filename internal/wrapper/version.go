package wrapper

// Version is the wrapper's own release and the tag of the bao-wrapper
// image. It is versioned apart from the operator so that an operator
// upgrade leaves OpenBao pod templates, and so the servers, alone: the
// image (and the init container that runs it) changes only when the
// wrapper does. TestVersionFollowsTheSource fails when the wrapper's
// sources change and Version does not.
const Version = "1.1.1"
