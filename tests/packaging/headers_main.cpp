// Links every generated one-header translation unit into one program: a function
// or variable defined in a header without `inline` (an ODR violation) fails here
// with a multiple-definition error, which compiling each header alone cannot show.
int main() { return 0; }
