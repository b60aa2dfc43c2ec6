/* Links every generated one-header C translation unit into one program: a C
 * header that defines a function or an object fails here with a
 * multiple-definition error. */
int main(void) { return 0; }
