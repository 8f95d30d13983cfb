from llmc.cli import main

main()
